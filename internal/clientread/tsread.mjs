// tsread.mjs runs the TypeScript MCP SDK v1 client's own readers on inputs
// from tracectl's differential tests (package clientread, type Node).
//
// Usage: node --input-type=module -e "$(cat tsread.mjs)" SDK_DIR
// SDK_DIR is the @modelcontextprotocol/sdk package; eventsource-parser is
// found the way the SDK's own import finds it. The first line written is
// {"ready":{...versions}} or {"fatal":"..."}. Then each input line
// "OP BASE64" gets one JSON line back, in order.
import { createInterface } from 'node:readline';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';

const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');

let EventSourceParserStream, JSONRPCMessageSchema, isRes, isErr, isReq, isNote, ReadBuffer, versions;
try {
  const sdkDir = process.argv[process.argv.length - 1];
  const sdkPkg = JSON.parse(fs.readFileSync(path.join(sdkDir, 'package.json'), 'utf8'));
  const req = createRequire(path.join(sdkDir, 'package.json'));
  const epPkgPath = req.resolve('eventsource-parser/package.json');
  const epPkg = JSON.parse(fs.readFileSync(epPkgPath, 'utf8'));
  // The SDK's ESM build imports 'eventsource-parser/stream': load the file
  // that import resolves to (the package's "import" condition).
  ({ EventSourceParserStream } = await import(
    pathToFileURL(path.join(path.dirname(epPkgPath), epPkg.exports['./stream'].import)).href));
  const types = await import(pathToFileURL(path.join(sdkDir, 'dist/esm/types.js')).href);
  JSONRPCMessageSchema = types.JSONRPCMessageSchema;
  isRes = types.isJSONRPCResultResponse;
  isErr = types.isJSONRPCErrorResponse;
  isReq = types.isJSONRPCRequest;
  isNote = types.isJSONRPCNotification;
  ({ ReadBuffer } = await import(pathToFileURL(path.join(sdkDir, 'dist/esm/shared/stdio.js')).href));
  versions = { sdk: sdkPkg.version, eventsourceParser: epPkg.version, node: process.version };
} catch (e) {
  out({ fatal: String(e && e.stack || e) });
  process.exit(1);
}

const numRepr = (n) => (Object.is(n, -0) ? '-0' : String(n));

// message is what the client's transport hands to onmessage after
// JSONRPCMessageSchema.parse, classified the way Protocol.connect routes it;
// a response's id is the one Protocol._onresponse matches: Number(id).
function message(m) {
  const r = { ok: true, json: JSON.stringify(m) };
  if (isRes(m) || isErr(m)) {
    r.kind = isRes(m) ? 'response' : 'error';
    r.numId = numRepr(Number(m.id));
  } else if (isReq(m)) {
    r.kind = 'request';
  } else if (isNote(m)) {
    r.kind = 'notification';
  } else {
    r.kind = 'unknown';
  }
  return r;
}

const failure = (e) => ({ ok: false, err: String(e && e.message || e).slice(0, 500) });

// sse mirrors StreamableHTTPClientTransport._handleSseStream
// (dist/esm/client/streamableHttp.js): TextDecoderStream, then
// EventSourceParserStream; events with empty data are skipped; only events
// without a name or named "message" are parsed, each on its own.
async function sse(bytes, cuts) {
  const res = { events: [], msgs: [], retry: [], chunks: 0 };
  try {
    const reader = chunked(bytes, cuts, () => res.chunks++)
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream({ onRetry: (ms) => res.retry.push(ms) }))
      .getReader();
    for (;;) {
      const { value: event, done } = await reader.read();
      if (done) break;
      res.events.push({ type: event.event ?? '', data: event.data, id: event.id ?? '', idSet: event.id !== undefined });
      if (!event.data) continue;
      if (!event.event || event.event === 'message') {
        try {
          res.msgs.push(message(JSONRPCMessageSchema.parse(JSON.parse(event.data))));
        } catch (e) {
          res.msgs.push(failure(e));
        }
      }
    }
  } catch (e) {
    res.err = String(e);
  }
  return res;
}

// chunked is a body stream that hands bytes over in the chunks cuts
// gives (offsets, ascending), as a network delivers them; no cuts is
// one chunk, as new Response(bytes).body does.
function chunked(bytes, cuts, onChunk) {
  if (!cuts || cuts.length === 0) {
    onChunk();
    return new Response(bytes).body;
  }
  const parts = [];
  let at = 0;
  for (const c of [...cuts, bytes.length]) {
    if (c > at && c <= bytes.length) {
      parts.push(bytes.slice(at, c));
      at = c;
    }
  }
  return new ReadableStream({
    pull(controller) {
      if (parts.length === 0) controller.close();
      else {
        onChunk();
        controller.enqueue(parts.shift());
      }
    },
  });
}

// splitCuts reads a "cut" input: a big-endian uint16 count k, k big-endian
// uint32 offsets, then the bytes.
function splitCuts(input) {
  const dv = new DataView(input.buffer, input.byteOffset, input.byteLength);
  const k = dv.getUint16(0);
  const cuts = [];
  for (let i = 0; i < k; i++) cuts.push(dv.getUint32(2 + 4 * i));
  return { cuts, bytes: input.slice(2 + 4 * k) };
}

// json mirrors the application/json branch of send(): response.json(), then
// a batch if it is an array; one schema failure rejects the whole body.
async function json(bytes) {
  try {
    const data = await new Response(bytes).json();
    const msgs = Array.isArray(data)
      ? data.map((m) => JSONRPCMessageSchema.parse(m))
      : [JSONRPCMessageSchema.parse(data)];
    return { batch: Array.isArray(data), msgs: msgs.map(message) };
  } catch (e) {
    return { err: String(e && e.message || e).slice(0, 500) };
  }
}

// stdio runs the SDK's own ReadBuffer the way StdioClientTransport's
// processReadBuffer does: a line that fails is reported and skipped.
function stdio(bytes, cuts) {
  const rb = new ReadBuffer();
  const msgs = [];
  let at = 0;
  for (const c of [...(cuts || []), bytes.length]) {
    if (c < at || c > bytes.length) continue;
    // one 'data' event: append, then processReadBuffer drains it
    rb.append(Buffer.from(bytes.slice(at, c)));
    at = c;
    for (;;) {
      try {
        const m = rb.readMessage();
        if (m === null) break;
        msgs.push(message(m));
      } catch (e) {
        msgs.push(failure(e));
      }
    }
  }
  return { msgs };
}

out({ ready: versions });
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  const sp = line.indexOf(' ');
  const op = sp < 0 ? line : line.slice(0, sp);
  const bytes = new Uint8Array(Buffer.from(sp < 0 ? '' : line.slice(sp + 1), 'base64'));
  switch (op) {
    case 'sse': out(await sse(bytes)); break;
    case 'json': out(await json(bytes)); break;
    case 'stdio': out(stdio(bytes)); break;
    case 'ssecut': { const { cuts, bytes: b } = splitCuts(bytes); out(await sse(b, cuts)); break; }
    case 'stdiocut': { const { cuts, bytes: b } = splitCuts(bytes); out(stdio(b, cuts)); break; }
    case 'number': out({ n: numRepr(Number(new TextDecoder().decode(bytes))) }); break;
    case 'decode': out({ s: new TextDecoder().decode(bytes) }); break;
    default: out({ fatal: 'unknown op ' + JSON.stringify(op) });
  }
}
