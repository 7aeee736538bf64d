// Runs the A2A test kit's conventions with the official A2A JS SDK 1.x
// client (@a2a-js/sdk 1.3.0) against the conformance agent, for
// ../jsclients_test.go: node client1.mjs BASE_URL TRANSPORT WEBHOOK_URL,
// TRANSPORT JSONRPC or HTTP+JSON. It prints one JSON object: each check's
// name with {ok, detail}. The Go test judges it and the webhook's deliveries
// (which must carry a push JWT it verifies).
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from "sdk1/client";
import { Role, TaskState } from "sdk1";

const [base, transport, webhook] = process.argv.slice(2);
const checks = {};
const id = (prefix) => `${prefix}-${Math.random().toString(36).slice(2)}`;
const text = (t) => ({ content: { $case: "text", value: t }, metadata: undefined, filename: "", mediaType: "" });
const msg = (messageId, t, extra = {}) => ({
  messageId, contextId: "", taskId: "", role: Role.ROLE_USER, parts: [text(t)],
  metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
});
const sendReq = (message, configuration) => ({ tenant: "", message, configuration, metadata: undefined });
const config = (extra = {}) => ({ acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false, ...extra });

async function check(name, fn) {
  try {
    checks[name] = { ok: true, detail: await fn() };
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
// taskOf returns the task of a SendMessage result.
function taskOf(res) {
  const t = res && (res.payload?.$case === "task" ? res.payload.value : res.task ?? (res.id ? res : undefined));
  expect(t, `no task in ${JSON.stringify(res).slice(0, 300)}`);
  return t;
}
const stateOf = (ev) => ev.payload?.$case === "statusUpdate" ? ev.payload.value.status?.state
  : ev.payload?.$case === "task" ? ev.payload.value.status?.state : undefined;

const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory(), new RestTransportFactory()],
  preferredTransports: [transport],
}));
const client = await factory.createFromUrl(base);

await check("card", async () => {
  const card = await client.getAgentCard();
  expect(card.supportedInterfaces?.length > 0, `card without supportedInterfaces: ${JSON.stringify(card).slice(0, 300)}`);
  return client.protocolVersion;
});

await check("complete-task", async () => {
  const task = taskOf(await client.sendMessage(sendReq(msg(id("tck-complete-task"), "hi"), config())));
  expect(task.status.state === TaskState.TASK_STATE_COMPLETED, `state ${task.status.state}`);
  return task.id;
});

await check("message-response", async () => {
  const res = await client.sendMessage(sendReq(msg(id("tck-message-response"), "hi"), config()));
  const m = res.payload?.$case === "message" ? res.payload.value : res.message ?? res;
  expect(m && m.role === Role.ROLE_AGENT, `got ${JSON.stringify(res).slice(0, 300)}`);
});

await check("input-required-then-continue", async () => {
  const first = taskOf(await client.sendMessage(sendReq(msg(id("tck-input-required"), "start"), config())));
  expect(first.status.state === TaskState.TASK_STATE_INPUT_REQUIRED, `first: ${first.status.state}`);
  const again = taskOf(await client.sendMessage(sendReq(msg(id("tck-input-required"), "more", { taskId: first.id, contextId: first.contextId }), config())));
  expect(again.id === first.id && again.status.state === TaskState.TASK_STATE_INPUT_REQUIRED, `second: ${again.status.state}`);
  const done = taskOf(await client.sendMessage(sendReq(msg(id("reply"), "done", { taskId: first.id, contextId: first.contextId }), config())));
  expect(done.status.state === TaskState.TASK_STATE_COMPLETED, `third: ${done.status.state}`);
  const got = await client.getTask({ tenant: "", id: first.id, historyLength: 10 });
  const users = got.history.filter((m) => m.role === Role.ROLE_USER).length;
  expect(users === 3, `history has ${users} user messages, want 3`);
});

await check("subscribe-input-required-stays-open", async () => {
  const first = taskOf(await client.sendMessage(sendReq(msg(id("tck-input-required"), "start"), config())));
  const events = [];
  const sub = (async () => { for await (const ev of client.resubscribeTask({ tenant: "", id: first.id })) events.push(ev); })();
  await new Promise((r) => setTimeout(r, 300));
  expect(events.length >= 1, "no first event");
  const before = events.length;
  await client.sendMessage(sendReq(msg(id("reply"), "done", { taskId: first.id, contextId: first.contextId }), config()));
  await sub;
  expect(events.length > before, "the stream ended before the task did");
  expect(stateOf(events[events.length - 1]) === TaskState.TASK_STATE_COMPLETED, `last state ${stateOf(events[events.length - 1])}`);
});

await check("stream", async () => {
  const events = await collect(client.sendMessageStream(sendReq(msg(id("tck-stream-001"), "go"), config())));
  expect(events[0].payload?.$case === "task", `first event ${events[0].payload?.$case}`);
  expect(stateOf(events[events.length - 1]) === TaskState.TASK_STATE_COMPLETED, "the stream did not end completed");
  expect(events.some((e) => e.payload?.$case === "artifactUpdate"), "no artifact update");
});

await check("resubscribe", async () => {
  const first = taskOf(await client.sendMessage(sendReq(msg(id("test-resubscribe-message-id"), "wait"), config({ returnImmediately: true }))));
  const events = await collect(client.resubscribeTask({ tenant: "", id: first.id }));
  expect(stateOf(events[events.length - 1]) === TaskState.TASK_STATE_COMPLETED, "the resubscription did not end completed");
});

await check("cancel", async () => {
  const first = taskOf(await client.sendMessage(sendReq(msg(id("test-resubscribe-message-id"), "wait"), config({ returnImmediately: true }))));
  const canceled = await client.cancelTask({ tenant: "", id: first.id, metadata: undefined });
  expect(canceled.status.state === TaskState.TASK_STATE_CANCELED, `state ${canceled.status.state}`);
});

await check("task-not-found", async () => {
  try {
    await client.getTask({ tenant: "", id: "no-such-task" });
  } catch (err) {
    expect(/TaskNotFound|not found/i.test(`${err.constructor.name} ${err.message}`), `error ${err.constructor.name}: ${err.message}`);
    return `${err.constructor.name}: ${err.message}`;
  }
  throw new Error("GetTask of an unknown task succeeded");
});

await check("push-config-crud", async () => {
  const task = taskOf(await client.sendMessage(sendReq(msg(id("test-resubscribe-message-id"), "wait"), config({ returnImmediately: true }))));
  const cfg = { tenant: "", id: "cfg-1", taskId: task.id, url: webhook, token: "crud-token", authentication: undefined };
  const made = await client.createTaskPushNotificationConfig(cfg);
  expect(made.id === "cfg-1", `create: ${JSON.stringify(made)}`);
  const got = await client.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-1" });
  expect(got.url === webhook, `get: ${JSON.stringify(got)}`);
  const list = await client.listTaskPushNotificationConfig({ tenant: "", taskId: task.id, pageSize: 0, pageToken: "" });
  expect(list.configs.length === 1, `list: ${JSON.stringify(list)}`);
  await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-1" });
  await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-1" }); // idempotent
  const after = await client.listTaskPushNotificationConfig({ tenant: "", taskId: task.id, pageSize: 0, pageToken: "" });
  expect(after.configs.length === 0, `list after delete: ${JSON.stringify(after)}`);
  await client.cancelTask({ tenant: "", id: task.id, metadata: undefined });
});

await check("push-delivery", async () => {
  const push = { tenant: "", id: "", taskId: "", url: webhook, token: "delivery-token-1", authentication: undefined };
  const task = taskOf(await client.sendMessage(sendReq(msg(id("tck-complete-task"), "push me"), config({ taskPushNotificationConfig: push }))));
  expect(task.status.state === TaskState.TASK_STATE_COMPLETED, `state ${task.status.state}`);
  return task.id;
});

console.log(JSON.stringify(checks));
