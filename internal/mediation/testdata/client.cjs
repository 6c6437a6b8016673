// A real MCP client from npm's TypeScript SDK (v1 @modelcontextprotocol/sdk
// or v2 @modelcontextprotocol/client) that makes one tools/call and reports
// what the application received. Driven by internal/mediation's tests.
//
//   node client.cjs SDK_DIR TIMEOUT_MS stdio COMMAND [ARGS...]
//   node client.cjs SDK_DIR TIMEOUT_MS http URL
//
// It prints one JSON object per line on stdout: {"event":"call", "ok":true,
// "text":...} or {"event":"call","ok":false,"code":...,"message":...,
// "data":...} for the call, {"event":"note","message":...} for each error
// the SDK reported on the side (a frame it dropped), and {"event":"closed"}
// at the end; {"event":"fatal",...} if connecting or listing failed.
'use strict';
const path = require('node:path');

const [sdkDir, timeoutMs, transportKind, ...rest] = process.argv.slice(2);
const pkg = require(path.join(sdkDir, 'package.json'));
const v2 = pkg.name === '@modelcontextprotocol/client';
let Client, StdioClientTransport, StreamableHTTPClientTransport;
if (v2) {
  ({ Client, StreamableHTTPClientTransport } = require(path.join(sdkDir, 'dist', 'index.cjs')));
  ({ StdioClientTransport } = require(path.join(sdkDir, 'dist', 'stdio.cjs')));
} else {
  ({ Client } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'index.js')));
  ({ StdioClientTransport } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'stdio.js')));
  ({ StreamableHTTPClientTransport } = require(path.join(sdkDir, 'dist', 'cjs', 'client', 'streamableHttp.js')));
}

function emit(event, more) {
  process.stdout.write(JSON.stringify({ event, ...more }) + '\n');
}

function errData(e) {
  try {
    return JSON.parse(JSON.stringify(e && e.data === undefined ? null : e.data));
  } catch {
    return String(e.data);
  }
}

async function main() {
  const client = new Client({ name: 'tracectl-mediation-' + (v2 ? 'v2' : 'v1'), version: '1.0.0' });
  client.onerror = (e) => emit('note', { message: String(e && e.message || e) });
  let transport;
  if (transportKind === 'stdio') {
    const [command, ...args] = rest;
    transport = new StdioClientTransport({ command, args, env: process.env, stderr: 'inherit' });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(rest[0]));
  }
  await client.connect(transport);
  await client.listTools();
  // On stdio the hostile server follows its answer with a log message; a
  // call still pending when that has been handled (setImmediate: after every
  // promise job the answer started) accepted none of the answer, and the
  // application gives up on it, as it would at its timeout.
  let answered;
  const marker = new Promise((resolve) => { answered = resolve; });
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === 'notifications/message' && n.params && n.params.data === 'hostile: answer sent') {
      setImmediate(answered);
    }
  };
  const ac = new AbortController();
  const opts = { timeout: Number(timeoutMs), signal: ac.signal };
  const params = { name: 'transfer', arguments: { amount: 1 } };
  let settled = false;
  const call = (v2 ? client.callTool(params, opts) : client.callTool(params, undefined, opts)).then(
    (res) => { settled = true; return { res }; },
    (err) => { settled = true; return { err }; },
  );
  marker.then(() => {
    if (!settled) {
      const e = new Error('the server sent its whole answer and the SDK accepted none of it');
      e.code = 'dropped';
      ac.abort(e);
    }
  });
  const { res, err } = await call;
  if (err === undefined) {
    const c = res && res.content && res.content[0];
    emit('call', { ok: true, text: c && c.type === 'text' ? c.text : JSON.stringify(res) });
  } else {
    const e = err;
    emit('call', { ok: false, code: e && e.code !== undefined ? e.code : null, message: String(e && e.message || e), data: errData(e) });
  }
  if (transportKind === 'http') {
    try { await transport.terminateSession(); } catch (e) { emit('note', { message: 'terminate: ' + e }); }
  }
  await client.close();
  emit('closed', {});
}

main().catch((e) => {
  emit('fatal', { message: String(e && e.stack || e) });
  process.exit(1);
});
