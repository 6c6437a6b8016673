// A real MCP client from npm's TypeScript SDK, driven by tracectl's tests
// (package tsclient). Usage:
//
//   node client.cjs SDK_DIR SCENARIO COMMAND [ARGS...]
//
// SDK_DIR is the installed package: node_modules/@modelcontextprotocol/sdk
// (v1) or node_modules/@modelcontextprotocol/client (v2). The client starts
// COMMAND over stdio exactly as an MCP host would, plays SCENARIO, and
// prints one JSON object per event on stdout ({"event": ...}).
'use strict';
const path = require('node:path');

const [sdkDir, scenario, command, ...args] = process.argv.slice(2);
const pkg = require(path.join(sdkDir, 'package.json'));
const v2 = pkg.name === '@modelcontextprotocol/client';
let Client, StdioClientTransport, ElicitRequestSchema;
if (v2) {
  ({ Client } = require(path.join(sdkDir, 'dist', 'index.cjs')));
  ({ StdioClientTransport } = require(path.join(sdkDir, 'dist', 'stdio.cjs')));
} else {
  ({ Client } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'index.js')));
  ({ StdioClientTransport } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'stdio.js')));
  ({ ElicitRequestSchema } = require(path.join(sdkDir, 'dist', 'cjs', 'types.js')));
}

function emit(event, more) {
  process.stdout.write(JSON.stringify({ event, ...more }) + '\n');
}

async function main() {
  const opts = v2 ? { versionNegotiation: { mode: 'auto' } } : {};
  const eliciting = scenario === 'elicit' || scenario === 'elicit-dropped';
  if (eliciting) {
    // The client answers elicitation/create (tracectl --approve-elicit):
    // it approves the call whose arguments say "through", declines any
    // other, and reports each question it was asked.
    opts.capabilities = { elicitation: {} };
  }
  const client = new Client({ name: 'tracectl-test-' + (v2 ? 'v2' : 'v1'), version: '1.0.0' }, opts);
  if (eliciting) {
    // v1 takes the request's schema; v2 the method's name.
    client.setRequestHandler(v2 ? 'elicitation/create' : ElicitRequestSchema, async (req) => {
      emit('asked', { message: req.params.message });
      if (req.params.message.includes('{"message":"through')) {
        return { action: 'accept', content: { approve: true, reason: 'the user said yes' } };
      }
      return { action: 'decline' };
    });
  }
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
  await client.connect(transport);
  emit('connected', { sdk: pkg.name, version: pkg.version, pid: transport.pid ?? null });
  const tools = await client.listTools();
  emit('listed', { tools: tools.tools.length });
  if (scenario === 'elicit-dropped') {
    // The first call, whatever becomes of it (v2 on a 2026-07-28
    // connection drops a server's JSON-RPC request by design).
    const r = await client.callTool({ name: 'echo', arguments: { message: 'through tracectl' } }).then(
      (res) => 'result: ' + JSON.stringify(res.content),
      (e) => 'rejected: code=' + e.code + ' message=' + e.message + ' data=' + JSON.stringify(e.data),
    );
    emit('first', { outcome: r });
  } else {
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'through tracectl' } });
    emit('echo', { text: echo.content[0].text });
  }

  switch (scenario) {
    case 'session':
    case 'elicit-dropped':
      break;
    case 'invented-tool': {
      // An agent inventing a tool name: what the client gets back, as its
      // application sees it.
      const r = await client.callTool({ name: 'get_weather_forecast', arguments: { city: 'Oslo' } }).then(
        (res) => (res.isError ? 'isError: ' : 'result: ') + JSON.stringify(res.content),
        (e) => 'rejected: ' + e,
      );
      emit('invented', { outcome: r });
      break;
    }
    case 'cancel-close': {
      // A long call, cancelled by the client after its first progress
      // notification; then close, timed.
      const ac = new AbortController();
      const long = client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 30 } },
        undefined,
        { signal: ac.signal, onprogress: () => ac.abort('test cancels') },
      ).then(() => 'answered', (e) => 'rejected: ' + e);
      emit('cancelled', { outcome: await long });
      break;
    }
    case 'elicit':
    case 'denied': {
      // A call a policy denies: what the client gets, as its application
      // sees it (a rejection carrying the JSON-RPC code, message and data).
      const r = await client.callTool({ name: 'echo', arguments: { message: 'forbidden' } }).then(
        (res) => 'result: ' + JSON.stringify(res),
        (e) => 'rejected: code=' + e.code + ' message=' + e.message + ' data=' + JSON.stringify(e.data),
      );
      emit('denied', { outcome: r });
      break;
    }
    case 'hang': {
      // A long call the server keeps writing progress for; the test kills
      // this client meanwhile.
      client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 60 } },
        undefined,
        { onprogress: () => emit('progress'), timeout: 60000 },
      ).catch(() => {});
      await new Promise(() => {});
      break;
    }
    default:
      throw new Error('unknown scenario ' + scenario);
  }
  const t0 = process.hrtime.bigint();
  await client.close();
  emit('closed', { closeMs: Number(process.hrtime.bigint() - t0) / 1e6 });
}

main().catch((e) => {
  emit('error', { message: String(e && e.stack || e) });
  process.exit(1);
});
