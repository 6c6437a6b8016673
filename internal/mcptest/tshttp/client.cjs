// A real Streamable HTTP MCP client from npm's TypeScript SDK v1, driven by
// tracectl's HTTP proxy tests. Usage:
//
//   node client.cjs SDK_DIR URL TOKEN [denied]
//
// It connects to URL with Authorization: Bearer TOKEN (a credential the
// proxy must forward and never record), lists the tools, calls echo, ends
// the session (DELETE) and prints one JSON object per event on stdout.
'use strict';
const path = require('node:path');

const [sdkDir, url, token, scenario] = process.argv.slice(2);
const pkg = require(path.join(sdkDir, 'package.json'));
const { Client } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'index.js'));
const { StreamableHTTPClientTransport } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'streamableHttp.js'));

function emit(event, more) {
  process.stdout.write(JSON.stringify({ event, ...more }) + '\n');
}

async function main() {
  const client = new Client({ name: 'tracectl-test-http-v1', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: 'Bearer ' + token } },
  });
  await client.connect(transport);
  emit('connected', { sdk: pkg.name, version: pkg.version, session: transport.sessionId ? true : false });
  const tools = await client.listTools();
  emit('listed', { tools: tools.tools.length });
  const echo = await client.callTool({ name: 'echo', arguments: { message: 'through tracectl proxy' } });
  emit('echo', { text: echo.content[0].text });
  if (scenario === 'denied') {
    // A call a policy denies: the rejection as the application sees it.
    const r = await client.callTool({ name: 'echo', arguments: { message: 'forbidden' } }).then(
      (res) => 'result: ' + JSON.stringify(res),
      (e) => 'rejected: code=' + e.code + ' message=' + e.message + ' data=' + JSON.stringify(e.data),
    );
    emit('denied', { message: r });
  }
  await transport.terminateSession();
  await client.close();
  emit('closed', {});
}

main().catch((e) => {
  emit('error', { message: String(e && e.stack || e) });
  process.exit(1);
});
