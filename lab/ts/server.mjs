// The seamwatch lab's server on the official TypeScript SDK (@modelcontextprotocol/sdk).
//
// Sessioned Streamable HTTP (2025-11-25) as the SDK's own example builds it: one
// StreamableHTTPServerTransport and McpServer per session, resumability through the SDK's
// example InMemoryEventStore (event ids `<streamId>_<epoch-ms>_<random>`, the stream id a UUID).
// What the SDK does on the wire, unchanged: a priming event (`id` + empty `data`, `retry` when
// --retry-ms is given) opens every POST stream of a >= 2025-11-25 client; a GET with
// `Last-Event-ID` replays the stored events of that cursor's stream after it (no new priming
// event) and then carries that stream's live events.
//
// Lab additions, outside MCP: `--pause-after K` makes the first streamed tool call wait after
// K progress notifications until the client's connection for it has closed (so a scenario can
// drop the stream at an exact point); `--close-after K` makes the first streamed tool call close
// its own POST stream after K progress notifications with the SDK's `closeSSEStream` (SEP-1699:
// the client resumes after `retry`) and run on; `--stateless` runs the SDK's stateless setup
// instead (a transport and server per POST: no session, no event store, no standalone GET);
// `GET /lab/state` and `POST /lab/settle` (waits until every tool call's response has been
// sent, or stored for replay) for the scenario, called directly rather than through the proxy.
//
//   node lab/ts/server.mjs --port 8001 [--pause-after 3 | --close-after 1] [--retry-ms 500]
//                          [--stateless]

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';

const MCP_PATH = '/mcp';
const SETTLE_TIMEOUT_MS = 5000;
// The example store replays a stream's events sorted by id string; two events stored in the
// same millisecond sort by their random suffix and may replay out of order. Progress events
// are spaced a few milliseconds apart so that a clean scenario replays in order.
const SAME_MS_GUARD_MS = 3;

const { values: options } = parseArgs({
  options: {
    port: { type: 'string' },
    'pause-after': { type: 'string' },
    'close-after': { type: 'string' },
    'retry-ms': { type: 'string' },
    stateless: { type: 'boolean', default: false },
  },
});
if (!options.port) {
  console.error(
    'usage: node server.mjs --port N [--pause-after K | --close-after K] [--retry-ms MS] ' +
      '[--stateless]',
  );
  process.exit(2);
}
const pauseAfter = options['pause-after'] ? Number(options['pause-after']) : undefined;
const closeAfter = options['close-after'] ? Number(options['close-after']) : undefined;
const retryInterval = options['retry-ms'] ? Number(options['retry-ms']) : undefined;

const transports = new Map(); // Mcp-Session-Id -> transport
const connectionClosed = new Map(); // `${session} ${request id}` -> Promise of the POST's close
// Tool calls whose response the transport has not yet sent (and stored in the event store).
const unanswered = new Set();
const lab = { streamedCalls: 0, tickets: 0, paused: [] };

function log(...parts) {
  console.error(new Date().toISOString(), ...parts);
}

async function streamProgress(steps, extra) {
  const token = extra._meta?.progressToken;
  if (token === undefined) return;
  lab.streamedCalls += 1;
  const pause = lab.streamedCalls === 1 ? pauseAfter : undefined;
  const close = lab.streamedCalls === 1 ? closeAfter : undefined;
  for (let step = 1; step <= steps; step += 1) {
    await extra.sendNotification({
      method: 'notifications/progress',
      params: { progressToken: token, progress: step, total: steps },
    });
    if (step === close) {
      if (extra.closeSSEStream === undefined) throw new Error('the SDK offers no closeSSEStream');
      log(`request ${extra.requestId}: stream closed by the server after step ${step}`);
      extra.closeSSEStream();
    }
    if (step === pause) {
      log(`paused after step ${step} of request ${extra.requestId}`);
      lab.paused.push(extra.requestId);
      await connectionClosed.get(`${extra.sessionId} ${JSON.stringify(extra.requestId)}`);
      log(`request ${extra.requestId}: client gone, running on`);
    }
    await delay(SAME_MS_GUARD_MS);
  }
}

function buildServer() {
  const server = new McpServer({ name: 'seamwatch-lab-ts', version: '1' });
  server.registerTool(
    'create_ticket',
    {
      description: 'File a support ticket. Every call files a new one.',
      inputSchema: { title: z.string(), steps: z.number().int().min(0).default(0) },
      // No annotations: a side-effecting tool.
    },
    async ({ title, steps }, extra) => {
      lab.tickets += 1;
      const ticket = lab.tickets;
      await streamProgress(steps, extra);
      return { content: [{ type: 'text', text: `filed ticket T-${ticket}: ${title}` }] };
    },
  );
  server.registerTool(
    'lookup',
    {
      description: "Read one value of the lab's directory.",
      inputSchema: { key: z.string() },
      annotations: { readOnlyHint: true },
    },
    async ({ key }) => ({ content: [{ type: 'text', text: `${key} = value-of-${key}` }] }),
  );
  server.registerTool(
    'slow_report',
    {
      description: 'Build a report step by step, sending notifications/progress.',
      inputSchema: { steps: z.number().int().min(0).default(3) },
      annotations: { readOnlyHint: true },
    },
    async ({ steps }, extra) => {
      await streamProgress(steps, extra);
      return { content: [{ type: 'text', text: `report ready after ${steps} steps` }] };
    },
  );
  return server;
}

function sendJson(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function rpcError(res, status, code, message) {
  sendJson(res, status, { jsonrpc: '2.0', error: { code, message }, id: null });
}

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function settle(res) {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  while (unanswered.size > 0) {
    if (Date.now() > deadline) {
      sendJson(res, 504, { settled: false, unanswered: [...unanswered], ...lab });
      return;
    }
    await delay(10); // polls this process's own state, not the wire
  }
  sendJson(res, 200, { settled: true, ...lab });
}

// `--stateless`: the SDK's stateless setup, a transport and server per POST (no Mcp-Session-Id,
// no event store, no standalone GET stream).
async function handleStateless(req, res, body) {
  if (req.method !== 'POST') {
    rpcError(res, 405, -32000, 'Method not allowed: this server is stateless');
    return;
  }
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  const server = buildServer();
  res.on('close', () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

async function handleMcp(req, res) {
  let body;
  if (req.method === 'POST') {
    try {
      body = await readJson(req);
    } catch (error) {
      rpcError(res, 400, -32700, `Parse error: ${error}`);
      return;
    }
  }
  if (options.stateless) {
    await handleStateless(req, res, body);
    return;
  }
  const sessionId = req.headers['mcp-session-id'];
  let transport = sessionId === undefined ? undefined : transports.get(sessionId);
  if (transport === undefined) {
    if (sessionId !== undefined) {
      rpcError(res, 404, -32001, 'Session not found');
      return;
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      rpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
      return;
    }
    const created = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new InMemoryEventStore(),
      retryInterval,
      onsessioninitialized: (id) => {
        transports.set(id, created);
        log(`session ${id} initialized`);
      },
    });
    created.onclose = () => {
      if (created.sessionId !== undefined) transports.delete(created.sessionId);
    };
    const send = created.send.bind(created);
    created.send = async (message, sendOptions) => {
      await send(message, sendOptions);
      if (message.id !== undefined && ('result' in message || 'error' in message)) {
        unanswered.delete(`${created.sessionId} ${JSON.stringify(message.id)}`);
      }
    };
    await buildServer().connect(created);
    transport = created;
  }
  if (req.method === 'POST' && body?.method === 'tools/call' && body.id !== undefined) {
    const key = `${sessionId} ${JSON.stringify(body.id)}`;
    unanswered.add(key);
    connectionClosed.set(key, new Promise((resolve) => res.on('close', resolve)));
  }
  await transport.handleRequest(req, res, body);
}

const httpServer = createServer((req, res) => {
  const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
  let handled;
  if (path === MCP_PATH) {
    handled = handleMcp(req, res);
  } else if (path === '/lab/state' && req.method === 'GET') {
    const state = { sessions: [...transports.keys()], unanswered: [...unanswered], ...lab };
    handled = Promise.resolve(sendJson(res, 200, state));
  } else if (path === '/lab/settle' && req.method === 'POST') {
    handled = settle(res);
  } else {
    handled = Promise.resolve(rpcError(res, 404, -32000, `no route ${req.method} ${path}`));
  }
  handled.catch((error) => {
    log('request failed:', error);
    if (!res.headersSent) rpcError(res, 500, -32603, String(error));
  });
});

httpServer.listen(Number(options.port), '127.0.0.1', () => {
  log(`seamwatch-lab-ts listening on 127.0.0.1:${options.port}`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, async () => {
    for (const transport of transports.values()) await transport.close();
    httpServer.close();
    process.exit(0);
  });
}
