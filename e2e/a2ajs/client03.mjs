// Runs the A2A test kit's conventions with the official A2A JS SDK 0.3
// client (@a2a-js/sdk 0.3.14) against the conformance agent, for
// ../jsclients_test.go: node client03.mjs BASE_URL TRANSPORT WEBHOOK_URL,
// TRANSPORT JSONRPC or HTTP+JSON. It prints one JSON object: each check's
// name with {ok, detail}. The Go test judges it and the webhook's deliveries.
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from "sdk03/client";

const [base, transport, webhook] = process.argv.slice(2);
const checks = {};
const id = (prefix) => `${prefix}-${Math.random().toString(36).slice(2)}`;
const msg = (messageId, text, extra = {}) => ({ kind: "message", role: "user", messageId, parts: [{ kind: "text", text }], ...extra });

async function check(name, fn) {
  try {
    const detail = await fn();
    checks[name] = { ok: true, detail };
  } catch (err) {
    checks[name] = { ok: false, detail: String(err && err.stack || err) };
  }
}
function expect(cond, what) {
  if (!cond) throw new Error(what);
}
async function collect(gen) {
  const events = [];
  for await (const ev of gen) events.push(ev);
  return events;
}

const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory(), new RestTransportFactory()],
  preferredTransports: [transport],
}));
const client = await factory.createFromUrl(base);

await check("card", async () => {
  const card = await client.getAgentCard();
  expect(card.protocolVersion && card.url, `card without 0.3 members: ${JSON.stringify(card).slice(0, 300)}`);
  return card.preferredTransport;
});

await check("complete-task", async () => {
  const task = await client.sendMessage({ message: msg(id("tck-complete-task"), "hi"), configuration: { blocking: true } });
  expect(task.kind === "task" && task.status.state === "completed", `got ${JSON.stringify(task).slice(0, 300)}`);
  return task.id;
});

await check("message-response", async () => {
  const m = await client.sendMessage({ message: msg(id("tck-message-response"), "hi") });
  expect(m.kind === "message" && m.role === "agent", `got ${JSON.stringify(m).slice(0, 300)}`);
});

await check("input-required-then-continue", async () => {
  const first = await client.sendMessage({ message: msg(id("tck-input-required"), "start"), configuration: { blocking: true } });
  expect(first.status.state === "input-required", `first: ${first.status.state}`);
  const again = await client.sendMessage({ message: msg(id("tck-input-required"), "more", { taskId: first.id, contextId: first.contextId }), configuration: { blocking: true } });
  expect(again.id === first.id && again.status.state === "input-required", `second: ${again.status.state}`);
  const done = await client.sendMessage({ message: msg(id("reply"), "done", { taskId: first.id, contextId: first.contextId }), configuration: { blocking: true } });
  expect(done.status.state === "completed", `third: ${done.status.state}`);
  const got = await client.getTask({ id: first.id, historyLength: 10 });
  const users = got.history.filter((m) => m.role === "user").length;
  expect(users === 3, `history has ${users} user messages, want 3`);
});

await check("stream", async () => {
  const events = await collect(client.sendMessageStream({ message: msg(id("tck-stream-001"), "go") }));
  const last = events[events.length - 1];
  expect(events[0].kind === "task", `first event ${events[0].kind}`);
  expect(last.kind === "status-update" && last.final && last.status.state === "completed", `last event ${JSON.stringify(last).slice(0, 200)}`);
  expect(events.some((e) => e.kind === "artifact-update"), "no artifact update");
  return events.map((e) => e.kind).join(",");
});

await check("resubscribe", async () => {
  const first = await client.sendMessage({ message: msg(id("test-resubscribe-message-id"), "wait"), configuration: { blocking: false } });
  const events = await collect(client.resubscribeTask({ id: first.id }));
  const last = events[events.length - 1];
  expect(last && last.kind === "status-update" && last.final && last.status.state === "completed", `last event ${JSON.stringify(last).slice(0, 200)}`);
});

await check("cancel", async () => {
  const first = await client.sendMessage({ message: msg(id("test-resubscribe-message-id"), "wait"), configuration: { blocking: false } });
  const canceled = await client.cancelTask({ id: first.id });
  expect(canceled.status.state === "canceled", `state ${canceled.status.state}`);
});

await check("task-not-found", async () => {
  try {
    await client.getTask({ id: "no-such-task" });
  } catch (err) {
    expect(/TaskNotFound/.test(err.constructor.name), `error ${err.constructor.name}: ${err.message}`);
    return err.message;
  }
  throw new Error("GetTask of an unknown task succeeded");
});

await check("not-cancelable", async () => {
  const task = await client.sendMessage({ message: msg(id("tck-complete-task"), "hi"), configuration: { blocking: true } });
  try {
    await client.cancelTask({ id: task.id });
  } catch (err) {
    expect(/TaskNotCancelable/.test(err.constructor.name), `error ${err.constructor.name}: ${err.message}`);
    return err.message;
  }
  throw new Error("canceling a completed task succeeded");
});

await check("push-config-crud", async () => {
  const task = await client.sendMessage({ message: msg(id("test-resubscribe-message-id"), "wait"), configuration: { blocking: false } });
  const set = await client.setTaskPushNotificationConfig({ taskId: task.id, pushNotificationConfig: { id: "cfg-1", url: webhook, token: "crud-token" } });
  expect(set.pushNotificationConfig.id === "cfg-1", `set: ${JSON.stringify(set)}`);
  const got = await client.getTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: "cfg-1" });
  expect(got.pushNotificationConfig.url === webhook, `get: ${JSON.stringify(got)}`);
  const list = await client.listTaskPushNotificationConfig({ id: task.id });
  expect(list.length === 1, `list: ${JSON.stringify(list)}`);
  await client.deleteTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: "cfg-1" });
  await client.deleteTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: "cfg-1" }); // idempotent
  const after = await client.listTaskPushNotificationConfig({ id: task.id });
  expect(after.length === 0, `list after delete: ${JSON.stringify(after)}`);
  await client.cancelTask({ id: task.id });
});

await check("push-delivery", async () => {
  const task = await client.sendMessage({
    message: msg(id("tck-complete-task"), "push me"),
    configuration: { blocking: true, pushNotificationConfig: { url: webhook, token: "delivery-token-03" } },
  });
  expect(task.status.state === "completed", `state ${task.status.state}`);
  return task.id;
});

console.log(JSON.stringify(checks));
