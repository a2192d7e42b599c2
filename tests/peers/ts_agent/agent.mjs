// An echo agent for interop tests, built on the official ACP TypeScript SDK 2.4.0.
//
// One AcpServer serves ACP v1 and v2 (the SDK's protocol router picks the version the
// client proposes) over WebSocket (GET /acp + Upgrade) and Streamable HTTP (/acp).
// A second loopback HTTP server takes test controls:
//
//   GET  /sessions  -> JSON: every known session and whether it is open or saved
//   POST /drop      -> abruptly destroy every client socket (WebSocket and HTTP)
//   POST /restart   -> drop, forget all ACP connections and in-memory sessions;
//                      the store survives, so known sessions read "saved"
//   POST /evict     -> body {"sessionId": ...}: forget the session (-> -32002)
//   POST /config    -> body {"chunkDelayMs": N, "holdTurns": bool}: pause N ms before each prompt
//                      chunk; while holdTurns is true, running turns wait before their next chunk
//
// On start it prints one JSON line on stdout:
//   {"event": "ready", "port": P, "controlPort": C, "pid": ...}
// It exits when stdin closes, so it never outlives the test process.
//
// This file is copied next to a node_modules directory holding the SDK (see
// tests/peers/typescript_sdk.py); it is not run from the repository.

import { randomBytes } from "node:crypto";
import http from "node:http";
import process from "node:process";

import * as acp1 from "@agentclientprotocol/sdk/unstable";
import * as acp2 from "@agentclientprotocol/sdk/experimental/v2/unstable";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import {
  createNodeHttpHandler,
  createNodeWebSocketUpgradeHandler,
} from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

const ENDPOINT = "/acp";
const AGENT_NAME = "echo-agent";
const AGENT_VERSION = "0.1.0";

// ---------------------------------------------------------------------------
// Session state

/**
 * The durable store: survives a simulated restart.
 * sessionId -> {cwd, turns: [{userContent, userText, userMessageId, agentMessageId, agentText}], updatedAt}
 */
const store = new Map();

/**
 * In-memory sessions: cleared by a simulated restart.
 * sessionId -> {cwd, version, client, running, cancelled}
 * `client` is the agent context of the connection the session is attached to
 * (the last one that created, loaded or resumed it).
 */
const live = new Map();

const settings = { chunkDelayMs: 0, holdTurns: false };
/** Turns waiting for holdTurns to be switched off. */
let heldTurns = [];

function waitWhileHeld() {
  if (!settings.holdTurns) {
    return Promise.resolve();
  }
  return new Promise((resolve) => heldTurns.push(resolve));
}

function setHoldTurns(hold) {
  settings.holdTurns = hold;
  if (!hold) {
    const waiting = heldTurns;
    heldTurns = [];
    for (const resolve of waiting) {
      resolve();
    }
  }
}
let restarts = 0;

function newId(prefix) {
  return `${prefix}_${randomBytes(6).toString("hex")}`;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function log(...args) {
  process.stderr.write(`[ts-agent] ${args.join(" ")}\n`);
}

function notFound(sessionId) {
  return acp1.RequestError.sessionNotFound(sessionId);
}

function remember(sessionId, cwd) {
  if (!store.has(sessionId)) {
    store.set(sessionId, { cwd, turns: [], updatedAt: new Date().toISOString() });
  }
  return store.get(sessionId);
}

function attach(sessionId, cwd, version, client) {
  const existing = live.get(sessionId);
  if (existing) {
    existing.client = client;
    existing.version = version;
    return existing;
  }
  const session = { cwd, version, client, running: false, cancelled: false };
  live.set(sessionId, session);
  return session;
}

function promptText(blocks) {
  return (blocks ?? [])
    .filter((block) => block && block.type === "text" && typeof block.text === "string")
    .map((block) => block.text)
    .join("");
}

/** Three chunks: "echo: ", then the words split in two halves, each with a trailing space. */
function echoChunks(text) {
  const words = text.split(/\s+/).filter((word) => word.length > 0);
  const middle = Math.ceil(words.length / 2);
  return ["echo: ", `${words.slice(0, middle).join(" ")} `, `${words.slice(middle).join(" ")} `];
}

/** Sends a session/update to whichever connection the session is attached to now. */
async function sendUpdate(sessionId, client, update) {
  try {
    await client.notify("session/update", { sessionId, update });
  } catch (error) {
    // The client went away (a drop); the agent keeps its own state going.
    log(`update for ${sessionId} not delivered: ${error?.message ?? error}`);
  }
}

function currentClient(sessionId, fallback) {
  return live.get(sessionId)?.client ?? fallback;
}

function listSessions(cwd) {
  const sessions = [];
  for (const [sessionId, entry] of store) {
    if (cwd && entry.cwd !== cwd) {
      continue;
    }
    sessions.push({ sessionId, cwd: entry.cwd, updatedAt: entry.updatedAt });
  }
  return { sessions };
}

async function runTurn(sessionId, session, text, onChunk) {
  session.running = true;
  session.cancelled = false;
  const chunks = echoChunks(text);
  let stopReason = "end_turn";
  try {
    for (const chunk of chunks) {
      await waitWhileHeld();
      if (settings.chunkDelayMs > 0) {
        await sleep(settings.chunkDelayMs);
      }
      if (session.cancelled) {
        stopReason = "cancelled";
        break;
      }
      await onChunk(chunk);
    }
  } finally {
    session.running = false;
  }
  return stopReason;
}

// ---------------------------------------------------------------------------
// ACP v1

function v1Agent() {
  return acp1
    .agent({ name: AGENT_NAME })
    .onRequest("initialize", () => ({
      protocolVersion: 1,
      agentCapabilities: {
        loadSession: true,
        sessionCapabilities: { resume: {}, close: {}, list: {}, status: {} },
      },
      agentInfo: { name: AGENT_NAME, title: `${AGENT_NAME} (TypeScript SDK 2.4.0)`, version: AGENT_VERSION },
    }))
    .onRequest("session/new", ({ params, client }) => {
      const sessionId = newId("sess");
      remember(sessionId, params.cwd);
      attach(sessionId, params.cwd, 1, client);
      return { sessionId };
    })
    .onRequest("session/status", ({ params }) => {
      if (live.has(params.sessionId)) {
        return { status: "open" };
      }
      if (store.has(params.sessionId)) {
        return { status: "saved" };
      }
      throw notFound(params.sessionId);
    })
    .onRequest("session/load", async ({ params, client }) => {
      const entry = store.get(params.sessionId);
      if (!entry) {
        throw notFound(params.sessionId);
      }
      attach(params.sessionId, params.cwd, 1, client);
      for (const turn of entry.turns) {
        await sendUpdate(params.sessionId, client, {
          sessionUpdate: "user_message_chunk",
          content: { type: "text", text: turn.userText },
        });
        await sendUpdate(params.sessionId, client, {
          sessionUpdate: "agent_message_chunk",
          content: { type: "text", text: turn.agentText },
        });
      }
      return { sessionId: params.sessionId };
    })
    .onRequest("session/resume", ({ params, client }) => {
      if (!live.has(params.sessionId) && !store.has(params.sessionId)) {
        throw notFound(params.sessionId);
      }
      attach(params.sessionId, params.cwd, 1, client);
      return { sessionId: params.sessionId };
    })
    .onRequest("session/close", ({ params }) => {
      if (!live.has(params.sessionId) && !store.has(params.sessionId)) {
        throw notFound(params.sessionId);
      }
      const session = live.get(params.sessionId);
      if (session) {
        session.cancelled = true;
        live.delete(params.sessionId);
      }
      return {};
    })
    .onRequest("session/list", ({ params }) => listSessions(params?.cwd))
    .onRequest("session/prompt", async ({ params, client }) => {
      const session = live.get(params.sessionId);
      const entry = store.get(params.sessionId);
      if (!session || !entry) {
        throw notFound(params.sessionId);
      }
      const text = promptText(params.prompt);
      const turn = {
        userContent: params.prompt,
        userText: text,
        userMessageId: newId("msg"),
        agentMessageId: newId("msg"),
        agentText: "",
      };
      const stopReason = await runTurn(params.sessionId, session, text, (chunk) =>
        sendUpdate(params.sessionId, currentClient(params.sessionId, client), {
          sessionUpdate: "agent_message_chunk",
          content: { type: "text", text: chunk },
        }),
      );
      turn.agentText = `echo: ${text}`;
      entry.turns.push(turn);
      entry.updatedAt = new Date().toISOString();
      return { stopReason };
    })
    .onNotification("session/cancel", ({ params }) => {
      const session = live.get(params.sessionId);
      if (session) {
        session.cancelled = true;
      }
    });
}

// ---------------------------------------------------------------------------
// ACP v2

function v2State(session) {
  return session.running ? { state: "running" } : { state: "idle" };
}

function v2Agent() {
  return acp2
    .agent({ name: AGENT_NAME })
    .onRequest("initialize", () => ({
      protocolVersion: 2,
      info: { name: AGENT_NAME, title: `${AGENT_NAME} (TypeScript SDK 2.4.0, ACP v2)`, version: AGENT_VERSION },
      capabilities: { session: { status: {} } },
    }))
    .onRequest("session/new", ({ params, client }) => {
      const sessionId = newId("sess");
      remember(sessionId, params.cwd);
      attach(sessionId, params.cwd, 2, client);
      return { sessionId };
    })
    .onRequest("session/status", ({ params }) => {
      const session = live.get(params.sessionId);
      if (session) {
        return { status: "open", state: v2State(session) };
      }
      if (store.has(params.sessionId)) {
        return { status: "saved" };
      }
      throw notFound(params.sessionId);
    })
    .onRequest("session/resume", async ({ params, client }) => {
      const entry = store.get(params.sessionId);
      if (!entry && !live.has(params.sessionId)) {
        throw notFound(params.sessionId);
      }
      const session = attach(params.sessionId, params.cwd, 2, client);
      if (params.replayFrom?.type === "start" && entry) {
        for (const turn of entry.turns) {
          await sendUpdate(params.sessionId, client, {
            sessionUpdate: "user_message",
            messageId: turn.userMessageId,
            content: turn.userContent,
          });
          await sendUpdate(params.sessionId, client, {
            sessionUpdate: "agent_message",
            messageId: turn.agentMessageId,
            content: [{ type: "text", text: turn.agentText }],
          });
        }
      }
      await sendUpdate(params.sessionId, client, { sessionUpdate: "state_update", ...v2State(session) });
      return { sessionId: params.sessionId };
    })
    .onRequest("session/close", ({ params }) => {
      if (!live.has(params.sessionId) && !store.has(params.sessionId)) {
        throw notFound(params.sessionId);
      }
      const session = live.get(params.sessionId);
      if (session) {
        session.cancelled = true;
        live.delete(params.sessionId);
      }
      return {};
    })
    .onRequest("session/list", ({ params }) => listSessions(params?.cwd))
    .onRequest("session/prompt", ({ params, client }) => {
      const session = live.get(params.sessionId);
      const entry = store.get(params.sessionId);
      if (!session || !entry) {
        throw notFound(params.sessionId);
      }
      const text = promptText(params.prompt);
      const turn = {
        userContent: params.prompt,
        userText: text,
        userMessageId: newId("msg"),
        agentMessageId: newId("msg"),
        agentText: `echo: ${text}`,
      };
      session.running = true;
      // The answer ({messageId}) goes first; the turn streams after it.
      setImmediate(() => {
        void streamV2Turn(params.sessionId, session, entry, turn, client);
      });
      return { messageId: turn.userMessageId };
    })
    .onNotification("session/cancel", ({ params }) => {
      const session = live.get(params.sessionId);
      if (session) {
        session.cancelled = true;
      }
    });
}

async function streamV2Turn(sessionId, session, entry, turn, client) {
  const target = () => currentClient(sessionId, client);
  await sendUpdate(sessionId, target(), {
    sessionUpdate: "user_message",
    messageId: turn.userMessageId,
    content: turn.userContent,
  });
  await sendUpdate(sessionId, target(), { sessionUpdate: "state_update", state: "running" });
  const stopReason = await runTurn(sessionId, session, turn.userText, (chunk) =>
    sendUpdate(sessionId, target(), {
      sessionUpdate: "agent_message_chunk",
      messageId: turn.agentMessageId,
      content: { type: "text", text: chunk },
    }),
  );
  entry.turns.push(turn);
  entry.updatedAt = new Date().toISOString();
  await sendUpdate(sessionId, target(), { sessionUpdate: "state_update", state: "idle", stopReason });
}

// ---------------------------------------------------------------------------
// Servers

const router = acp2.agentProtocolRouter().withV1(v1Agent()).withV2(v2Agent());
const webSocketServer = new WebSocketServer({ noServer: true });

/** Everything tied to one "process lifetime" of the agent; replaced by a restart. */
let current = makeAcpServer();

function makeAcpServer() {
  const server = new AcpServer({ agent: router });
  return {
    server,
    handleHttp: createNodeHttpHandler(server),
    handleUpgrade: createNodeWebSocketUpgradeHandler(server, webSocketServer),
  };
}

const clientSockets = new Set();
const acpHttpServer = http.createServer((req, res) => {
  if (new URL(req.url ?? "/", "http://localhost").pathname !== ENDPOINT) {
    res.writeHead(404, { "Content-Type": "text/plain" }).end("Not Found");
    return;
  }
  current.handleHttp(req, res);
});
acpHttpServer.on("connection", (socket) => {
  clientSockets.add(socket);
  socket.once("close", () => clientSockets.delete(socket));
});
acpHttpServer.on("upgrade", (req, socket, head) => {
  if (new URL(req.url ?? "/", "http://localhost").pathname !== ENDPOINT) {
    socket.destroy();
    return;
  }
  current.handleUpgrade(req, socket, head);
});

function dropAll() {
  let count = 0;
  for (const client of webSocketServer.clients) {
    client.terminate();
    count += 1;
  }
  for (const socket of clientSockets) {
    socket.destroy();
    count += 1;
  }
  clientSockets.clear();
  return count;
}

async function restart() {
  const dropped = dropAll();
  const previous = current;
  current = makeAcpServer();
  for (const session of live.values()) {
    session.cancelled = true;
  }
  live.clear();
  restarts += 1;
  await previous.server.close().catch((error) => log(`close after restart: ${error?.message ?? error}`));
  return dropped;
}

function sessionsSnapshot() {
  const sessions = {};
  for (const [sessionId, entry] of store) {
    const session = live.get(sessionId);
    sessions[sessionId] = {
      status: session ? "open" : "saved",
      cwd: entry.cwd,
      turns: entry.turns.length,
      running: Boolean(session?.running),
      protocolVersion: session?.version ?? null,
    };
  }
  for (const [sessionId, session] of live) {
    if (!sessions[sessionId]) {
      sessions[sessionId] = {
        status: "open",
        cwd: session.cwd,
        turns: 0,
        running: session.running,
        protocolVersion: session.version,
      };
    }
  }
  return {
    sessions,
    restarts,
    liveSockets: clientSockets.size,
    chunkDelayMs: settings.chunkDelayMs,
    holdTurns: settings.holdTurns,
    heldTurns: heldTurns.length,
  };
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on("data", (part) => parts.push(part));
    req.on("end", () => {
      const text = Buffer.concat(parts).toString("utf8");
      try {
        resolve(text ? JSON.parse(text) : {});
      } catch (error) {
        reject(error);
      }
    });
    req.on("error", reject);
  });
}

function sendJson(res, status, value) {
  res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(value));
}

const controlServer = http.createServer(async (req, res) => {
  try {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (req.method === "GET" && path === "/sessions") {
      sendJson(res, 200, sessionsSnapshot());
    } else if (req.method === "POST" && path === "/drop") {
      sendJson(res, 200, { dropped: dropAll() });
    } else if (req.method === "POST" && path === "/restart") {
      sendJson(res, 200, { dropped: await restart() });
    } else if (req.method === "POST" && path === "/evict") {
      const { sessionId } = await readBody(req);
      const known = store.has(sessionId) || live.has(sessionId);
      const session = live.get(sessionId);
      if (session) {
        session.cancelled = true;
      }
      live.delete(sessionId);
      store.delete(sessionId);
      sendJson(res, 200, { evicted: known });
    } else if (req.method === "POST" && path === "/config") {
      const body = await readBody(req);
      if (Number.isFinite(body.chunkDelayMs) && body.chunkDelayMs >= 0) {
        settings.chunkDelayMs = body.chunkDelayMs;
      }
      if (typeof body.holdTurns === "boolean") {
        setHoldTurns(body.holdTurns);
      }
      sendJson(res, 200, { chunkDelayMs: settings.chunkDelayMs, holdTurns: settings.holdTurns });
    } else {
      sendJson(res, 404, { error: `no control ${req.method} ${path}` });
    }
  } catch (error) {
    sendJson(res, 500, { error: String(error?.message ?? error) });
  }
});

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });
}

async function shutdown(code) {
  dropAll();
  controlServer.close();
  acpHttpServer.close();
  await current.server.close().catch(() => undefined);
  process.exit(code);
}

const port = await listen(acpHttpServer);
const controlPort = await listen(controlServer);
process.stdin.on("end", () => void shutdown(0));
process.stdin.on("error", () => void shutdown(0));
process.stdin.resume();
process.on("SIGTERM", () => void shutdown(0));
process.on("SIGINT", () => void shutdown(0));
process.stdout.write(`${JSON.stringify({ event: "ready", port, controlPort, pid: process.pid })}\n`);
log(`listening on http://127.0.0.1:${port}${ENDPOINT} (control ${controlPort})`);
