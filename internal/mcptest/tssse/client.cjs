// A real MCP client on the deprecated HTTP+SSE transport (2024-11-05),
// npm's TypeScript SDK v1 SSEClientTransport, for tracectl's HTTP proxy
// tests. Usage:
//
//   node client.cjs SDK_DIR URL
//
// It opens the stream at URL, lists the tools, calls echo twice and
// closes, printing one JSON object per event on stdout.
'use strict';
const path = require('node:path');

const [sdkDir, url] = process.argv.slice(2);
const pkg = require(path.join(sdkDir, 'package.json'));
const { Client } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'index.js'));
const { SSEClientTransport } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'sse.js'));

function emit(event, more) {
  process.stdout.write(JSON.stringify({ event, ...more }) + '\n');
}

async function main() {
  const client = new Client({ name: 'tracectl-test-sse-client-v1', version: '1.0.0' });
  const transport = new SSEClientTransport(new URL(url));
  await client.connect(transport);
  emit('connected', { sdk: pkg.name, version: pkg.version });
  const tools = await client.listTools();
  emit('listed', { tools: tools.tools.length });
  for (const message of ['first over sse', 'second over sse']) {
    const echo = await client.callTool({ name: 'echo', arguments: { message } });
    emit('echo', { text: echo.content[0].text });
  }
  await client.close();
  emit('closed', {});
}

main().catch((e) => {
  emit('error', { message: String(e && e.stack || e) });
  process.exit(1);
});
