// The official AG-UI client (@ag-ui/client 1.0.0, HttpAgent) driven against Sidekick as its
// docs show: `new HttpAgent({url, headers})`, the conversation in `initialMessages` /
// `addMessage`, `runAgent({runId, tools, context, forwardedProps, resume}, subscriber)`,
// `pendingInterrupts` / `buildResumeArray`, `abortRun()`. Run by
// tests/protocols/test_agui_client.py: `node flows.mjs '<json config>'`. It writes one JSON
// object a line to stdout (what it saw, where it waits) and, where a flow waits for the test
// (to kill or restart services, or to let the model answer), reads one line from stdin.

import readline from "node:readline";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const cfg = JSON.parse(process.argv[2]);
const say = (what) => process.stdout.write(`${JSON.stringify(what)}\n`);

// When a connection dies mid-stream, @ag-ui/client 1.0.0's teardown (run/http-request.ts:
// `reader.cancel().catch(... throw error)`) rethrows the network error as an unhandled
// rejection, which ends a Node process (a browser only logs it). An app in Node keeps running
// past it, as this does; the test checks that nothing else went unhandled.
const unhandled = [];
process.on("unhandledRejection", (error) => unhandled.push(String(error?.message ?? error)));

const waiting = [];
const lines = [];
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const next = waiting.shift();
  if (next) next(line);
  else lines.push(line);
});
// The test's go-ahead.
const go = () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => waiting.push(r)));

function agent(threadId, messages = []) {
  return new HttpAgent({
    url: cfg.url,
    headers: { Authorization: `Bearer ${cfg.token}` },
    threadId,
    initialMessages: messages,
  });
}

const user = (content) => ({ id: `u-${Math.random().toString(36).slice(2)}`, role: "user", content });

// What the client applied: each event's type, name, and its id (metadata.sidekick.eventId;
// none on the framing of a re-attached stream).
function record(event) {
  return {
    type: event.type,
    id: event.metadata?.sidekick?.eventId ?? null,
    name: event.stepName ?? event.toolCallName ?? null,
  };
}

function recorder(seen, then) {
  return {
    async onEvent({ event }) {
      seen.push(record(event));
      if (then) await then(event);
    },
  };
}

const lastId = (seen) => [...seen].reverse().find((e) => e.id)?.id ?? null;
const assistantText = (a) =>
  a.messages.filter((m) => m.role === "assistant" && typeof m.content === "string").map((m) => m.content);

async function attempt(work) {
  try {
    return { ok: await work() };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

const flows = {
  // One run, start to end.
  async direct() {
    const a = agent(cfg.threadId, [user(cfg.text)]);
    const seen = [];
    const result = await a.runAgent({ runId: cfg.runId }, recorder(seen));
    say({ seen, result: result.result, texts: assistantText(a), state: a.state });
  },

  // The connection drops mid-run (abortRun: the client goes away), the run goes on, and the
  // client re-attaches with the same runId and the last event id it saw.
  async drop() {
    const a = agent(cfg.threadId, [user(cfg.text)]);
    const before = [];
    await a.runAgent(
      { runId: cfg.runId },
      recorder(before, (event) => {
        if (event.type === "STEP_STARTED" && event.stepName === cfg.until) a.abortRun();
      }),
    );
    say({ dropped: lastId(before) });
    await go();
    const rest = [];
    const again = await attempt(() =>
      a.runAgent({ runId: cfg.runId, forwardedProps: { sidekick: { lastEventId: lastId(before) } } }, recorder(rest)),
    );
    say({ before, rest, again: again.error ?? "ok", texts: assistantText(a) });
  },

  // The gateway is SIGKILLed mid-stream and started again; the client re-attaches to it.
  async kill() {
    const a = agent(cfg.threadId, [user(cfg.text)]);
    const before = [];
    const first = await attempt(() =>
      a.runAgent(
        { runId: cfg.runId },
        recorder(before, async (event) => {
          if (event.type === "STEP_STARTED" && event.stepName === cfg.until) {
            say({ at: cfg.until, last: lastId(before) });
            await go(); // the test kills the gateway meanwhile
          }
        }),
      ),
    );
    say({ dropped: lastId(before), error: first.error ?? null });
    await go(); // the gateway is back
    const rest = [];
    const again = await attempt(() =>
      a.runAgent({ runId: cfg.runId, forwardedProps: { sidekick: { lastEventId: lastId(before) } } }, recorder(rest)),
    );
    say({ before, rest, again: again.error ?? "ok", texts: assistantText(a), unhandled });
  },

  // A frontend tool: the run ends with the call, the app runs it, the next run carries its
  // result (the test restarts every service in between); a replay of the result is refused.
  async tools() {
    const a = agent(cfg.threadId, [user(cfg.text)]);
    const tools = [cfg.tool];
    const context = cfg.context;
    const first = [];
    let pending = [];
    await a.runAgent(
      { tools, context },
      {
        ...recorder(first),
        onRunFinishedEvent(params) {
          if (params.outcome === "success") pending = params.pendingToolCallIds;
        },
      },
    );
    const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => pending.includes(c.id));
    say({ first, pending, call });
    await go(); // every service restarts meanwhile
    a.addMessage({ id: "tool-result-1", role: "tool", toolCallId: call.id, content: cfg.result });
    const answered = a.messages.slice();
    const second = [];
    const result = await a.runAgent({ tools, context }, recorder(second));
    // Another client holding the same conversation sends the same result again.
    const replay = await attempt(() => agent(cfg.threadId, answered).runAgent({ tools, context }));
    say({ second, result: result.result, texts: assistantText(a), replay: replay.error ?? "accepted" });
  },

  // An approval interrupt (a frontend tool the policy asks about): answered "yes" in time, the
  // tool is handed to the app; another left past its expiresAt, the client refuses to answer.
  async approval() {
    const tools = [cfg.tool];
    const a = agent(cfg.threadId, [user(cfg.text)]);
    const asked = [];
    await a.runAgent({ tools }, recorder(asked));
    const interrupt = a.pendingInterrupts[0] ?? null;
    const yes = buildResumeArray(a.pendingInterrupts, { [interrupt.id]: { status: "resolved", payload: "yes" } });
    let pending = [];
    const approved = [];
    await a.runAgent(
      { tools, resume: yes },
      {
        ...recorder(approved),
        onRunFinishedEvent(params) {
          if (params.outcome === "success") pending = params.pendingToolCallIds;
        },
      },
    );
    const b = agent(cfg.otherThreadId, [user(cfg.text)]);
    await b.runAgent({ tools });
    const late = b.pendingInterrupts[0];
    const wait = new Date(late.expiresAt).getTime() - Date.now() + 300;
    await new Promise((r) => setTimeout(r, Math.max(wait, 0)));
    const tooLate = await attempt(() =>
      b.runAgent({
        tools,
        resume: buildResumeArray(b.pendingInterrupts, { [late.id]: { status: "resolved", payload: "yes" } }),
      }),
    );
    say({ asked, interrupt, approved, pending, late, tooLate: tooLate.error ?? "accepted" });
  },

  // abortRun() (a Stop button) closes the connection; with the opt-in the run is cancelled too.
  async stop() {
    const a = agent(cfg.threadId, [user(cfg.text)]);
    const seen = [];
    const forwardedProps = cfg.optIn ? { sidekick: { cancelOnDisconnect: true } } : {};
    await a.runAgent(
      { runId: cfg.runId, forwardedProps },
      recorder(seen, (event) => {
        if (event.type === "STEP_STARTED" && event.stepName === cfg.until) a.abortRun();
      }),
    );
    say({ aborted: lastId(seen), running: a.isRunning });
  },
};

const flow = flows[cfg.flow];
if (!flow) throw new Error(`no flow ${cfg.flow}`);
await flow();
// Only a killed connection may leave its error unhandled (the kill flow reports and checks it).
if (unhandled.length && cfg.flow !== "kill") {
  process.stderr.write(`unhandled: ${unhandled.join("; ")}\n`);
  process.exit(1);
}
process.exit(0);
