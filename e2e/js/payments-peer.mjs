#!/usr/bin/env node
// payments-peer.mjs --listen HOST:PORT --key JWK_FILE --bank FILE --release DIR
//
// A payments agent built on the official A2A JS SDK 1.x server
// (@a2a-js/sdk: DefaultRequestHandler, an AgentExecutor, and the express
// handlers jsonRpcHandler and agentCardHandler), so Handoff's e2e tests
// (../jspeer_test.go) can delegate to a peer that Handoff did not write.
//
// Its one skill, refund (tag payments), takes a data part
// {"order": "o-1", "amount_cents": 1250, "card": "4242…"} and works slowly,
// as a bank does: it says "reserving 1250 cents for order o-1" (working),
// then waits until the file named for the order exists in the --release
// directory (the test says when the bank settles). Then:
//   - card 4000000000000002 is declined: the task fails with the status
//     message "card declined", and the bank records nothing;
//   - any other card settles: one JSON line {"order", "amount_cents",
//     "receipt_id", "settled_at"} is appended to the --bank file, and the
//     task completes with the artifact "receipt"
//     {"provider": "js-bank", "receipt_id", "amount_cents", "observed_at"}.
//
// Its card is signed by the SDK's own generateAgentCardSignature with the
// private JWK in --key (its kid and alg are the key's), with no jku: the
// operator of the delegating agent pins the public key out of band.
//
// It prints "listening URL" on stdout once it serves, and stops on SIGINT
// or SIGTERM.

import { existsSync } from "node:fs";
import { appendFile, readFile } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { basename, join } from "node:path";
import express from "express";
import { generateAgentCardSignature } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const usage = "usage: node payments-peer.mjs --listen HOST:PORT --key JWK_FILE --bank FILE --release DIR";
const declinedCard = "4000000000000002";

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i]?.replace(/^--/, "");
    if (!["listen", "key", "bank", "release"].includes(name) || i + 1 >= argv.length) {
      console.error(usage);
      process.exit(2);
    }
    opts[name] = argv[i + 1];
  }
  for (const name of ["listen", "key", "bank", "release"]) {
    if (!opts[name]) {
      console.error(`--${name} is required`, usage);
      process.exit(2);
    }
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const [host, port] = opts.listen.split(":");
const base = `http://${opts.listen}`;
const jwk = JSON.parse(await readFile(opts.key, "utf8"));

const card = {
  name: "JS Payments",
  description: "Refunds card payments; built on the A2A JS SDK.",
  version: "1.0.0",
  supportedInterfaces: [{ url: `${base}/a2a/jsonrpc`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" }],
  provider: undefined,
  capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ["application/json"],
  defaultOutputModes: ["application/json"],
  skills: [{
    id: "refund", name: "Refund", description: "Refunds an order's card payment.",
    tags: ["payments"], examples: [], inputModes: [], outputModes: [], securityRequirements: [],
  }],
  signatures: [],
};

const text = (t) => ({ content: { $case: "text", value: t }, metadata: undefined, filename: "", mediaType: "" });
const data = (v) => ({ content: { $case: "data", value: v }, metadata: undefined, filename: "", mediaType: "" });
const agentMessage = (ctx, t) => ({
  messageId: randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: 2 /* ROLE_AGENT */,
  parts: [text(t)], metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (ctx, state, t) => AgentEvent.statusUpdate({
  taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined,
  status: { state, message: t ? agentMessage(ctx, t) : undefined, timestamp: new Date().toISOString() },
});

// The refund request: the first data part of the user's message.
function request(message) {
  for (const p of message.parts ?? []) {
    if (p.content?.$case === "data") return p.content.value ?? {};
  }
  return {};
}

// released waits until the order's file is in the release directory; false
// when the task is canceled first.
async function released(ctx, order) {
  const file = join(opts.release, basename(String(order)));
  while (!existsSync(file)) {
    if (canceled.has(ctx.taskId)) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

const canceled = new Set();

const executor = {
  async execute(ctx, bus) {
    const req = request(ctx.userMessage);
    bus.publish(AgentEvent.task({
      id: ctx.taskId, contextId: ctx.contextId, artifacts: [], history: [ctx.userMessage], metadata: undefined,
      status: { state: 1 /* SUBMITTED */, message: undefined, timestamp: new Date().toISOString() },
    }));
    bus.publish(status(ctx, 2 /* WORKING */, `reserving ${req.amount_cents} cents for order ${req.order}`));
    if (!(await released(ctx, req.order))) {
      bus.publish(status(ctx, 5 /* CANCELED */, "refund canceled"));
      bus.finished();
      return;
    }
    if (req.card === declinedCard) {
      bus.publish(status(ctx, 4 /* FAILED */, "card declined"));
      bus.finished();
      return;
    }
    const receipt = { provider: "js-bank", receipt_id: `re_${randomUUID()}`, amount_cents: req.amount_cents };
    await appendFile(opts.bank, JSON.stringify({ order: req.order, ...receipt, settled_at: new Date().toISOString() }) + "\n");
    bus.publish(AgentEvent.artifactUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: {
        artifactId: randomUUID(), name: "receipt", description: "", metadata: undefined, extensions: [],
        parts: [data({ ...receipt, observed_at: new Date().toISOString() })],
      },
    }));
    bus.publish(status(ctx, 3 /* COMPLETED */, `refunded ${req.amount_cents} cents`));
    bus.finished();
  },
  async cancelTask(taskId) {
    canceled.add(taskId);
  },
};

const sign = generateAgentCardSignature(jwk, { alg: jwk.alg, kid: jwk.kid, typ: "JOSE" });
const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor,
  undefined, undefined, undefined, undefined, sign);

const app = express();
app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }));
app.use("/a2a/jsonrpc", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(Number(port), host, () => console.log(`listening ${base}`));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => server.close(() => process.exit(0)));
