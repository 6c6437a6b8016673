// A real MCP server on the deprecated HTTP+SSE transport (2024-11-05),
// npm's TypeScript SDK v1 SSEServerTransport on node's http module, for
// tracectl's HTTP proxy tests. Usage:
//
//   node server.cjs SDK_DIR
//
// It listens on 127.0.0.1 (an ephemeral port), prints
// {"event":"listening","port":N}, then {"event":"executed","text":...}
// for every echo call it runs. GET /sse opens a session's stream (its
// endpoint event names /messages?sessionId=...); POST /messages delivers
// a message to that session.
'use strict';
const http = require('node:http');
const path = require('node:path');

const [sdkDir] = process.argv.slice(2);
const { McpServer } = require(path.join(sdkDir, 'dist', 'cjs', 'server', 'mcp.js'));
const { SSEServerTransport } = require(path.join(sdkDir, 'dist', 'cjs', 'server', 'sse.js'));
const { createRequire } = require('node:module');
const z = createRequire(path.join(sdkDir, 'package.json'))('zod'); // the zod the SDK resolves

function emit(event, more) {
  process.stdout.write(JSON.stringify({ event, ...more }) + '\n');
}

const sessions = new Map();

function newServer() {
  const server = new McpServer({ name: 'tracectl-test-sse-v1', version: '1.0.0' });
  server.tool('echo', 'echoes its message', { message: z.string() }, async ({ message }) => {
    emit('executed', { text: message });
    return { content: [{ type: 'text', text: message }] };
  });
  return server;
}

const httpServer = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (req.method === 'GET' && url.pathname === '/sse') {
    const transport = new SSEServerTransport('/messages', res);
    sessions.set(transport.sessionId, transport);
    res.on('close', () => sessions.delete(transport.sessionId));
    await newServer().connect(transport);
    return;
  }
  if (req.method === 'POST' && url.pathname === '/messages') {
    const transport = sessions.get(url.searchParams.get('sessionId') || '');
    if (!transport) {
      res.writeHead(404).end('no such session');
      return;
    }
    await transport.handlePostMessage(req, res);
    return;
  }
  res.writeHead(404).end();
});
httpServer.listen(0, '127.0.0.1', () => emit('listening', { port: httpServer.address().port }));
