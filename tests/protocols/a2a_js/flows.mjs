// The official @a2a-js/sdk client against a running Sidekick, used as its README shows:
// ClientFactory.createFromUrl, then the Client's methods, with createAuthenticatingFetchWithRetry
// for the bearer token. Run by tests/protocols/test_a2a_js.py:
//
//   node flows.mjs <flow> <base url> [<token>] [<webhook url>] [<private webhook url>]
//
// Prints one JSON object: what the flow saw (the Python test judges it).
import { randomUUID } from 'node:crypto';

import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

const [flow, baseUrl, token, webhook, privateWebhook] = process.argv.slice(2);

function factory() {
  if (!token) return new ClientFactory();
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
    }),
  );
}

function message(parts, { contextId = '', taskId = '' } = {}) {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: 1, // Role.ROLE_USER
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });
const data = (value) => ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: 'application/json' });

function send(msg, configuration = undefined) {
  return { tenant: '', message: msg, configuration, metadata: undefined };
}

function config(extra = {}) {
  return {
    acceptedOutputModes: [],
    taskPushNotificationConfig: undefined,
    historyLength: undefined,
    returnImmediately: false,
    ...extra,
  };
}

function refusal(error) {
  return { name: error?.constructor?.name, code: error?.code, message: String(error?.message ?? error) };
}

const flows = {
  // A task waiting for input, a second task in its context, then the first answered by its id.
  async tasks(client) {
    const contextId = `js-${randomUUID().slice(0, 8)}`;
    const first = await client.sendMessage(send(message([text('Please route: weather')], { contextId })));
    const second = await client.sendMessage(send(message([text('Please route: news')], { contextId })));
    const waiting = await client.getTask({ tenant: '', id: first.id, historyLength: undefined });
    const answered = await client.sendMessage(send(message([text('Paris')], { taskId: first.id })));
    return {
      first: { id: first.id, state: first.status.state },
      second: { id: second.id, contextId: second.contextId, state: second.status.state },
      waiting: waiting.status.state,
      answered: { id: answered.id, state: answered.status.state },
      contextId,
    };
  },

  // A message whose only part is JSON data.
  async data(client) {
    const task = await client.sendMessage(send(message([data({ city: 'Lyon', days: [1, 2] })])));
    return { id: task.id, state: task.status.state };
  },

  // ListTasks paging, as the client sends it (its status filter is TASK_STATE_UNSPECIFIED).
  async paging(client) {
    const contextId = `js-page-${randomUUID().slice(0, 8)}`;
    const ids = [];
    for (let n = 0; n < 3; n += 1) {
      const task = await client.sendMessage(send(message([text(`Hello there ${n}`)], { contextId })));
      ids.push(task.id);
    }
    const ask = (extra) => client.listTasks({ tenant: '', contextId, status: 0, pageToken: '', ...extra });
    const first = await ask({ pageSize: 2 });
    const rest = await ask({ pageSize: 2, pageToken: first.nextPageToken });
    const empty = await client.listTasks({ tenant: '', contextId: `${contextId}-none`, status: 0, pageToken: '' });
    let zero;
    try {
      await ask({ pageSize: 0 });
      zero = { refused: false };
    } catch (error) {
      zero = { refused: true, ...refusal(error) };
    }
    return {
      ids,
      first: { ids: first.tasks.map((t) => t.id), pageSize: first.pageSize, totalSize: first.totalSize },
      rest: { ids: rest.tasks.map((t) => t.id), pageSize: rest.pageSize, next: rest.nextPageToken },
      empty: { pageSize: empty.pageSize, totalSize: empty.totalSize },
      zero,
    };
  },

  // A webhook for a new task (with SendMessage), one made for a task that exists, a listing,
  // and a webhook on a private address, refused when it is given.
  async push(client) {
    const hook = { tenant: '', id: '', taskId: '', url: webhook, token: 'js-token', authentication: undefined };
    const task = await client.sendMessage(
      send(message([text('Please route: a plan')]), config({ taskPushNotificationConfig: hook })),
    );
    const made = await client.createTaskPushNotificationConfig({ ...hook, taskId: task.id, id: 'second' });
    const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    let refused;
    try {
      await client.createTaskPushNotificationConfig({ ...hook, taskId: task.id, url: privateWebhook });
      refused = { refused: false };
    } catch (error) {
      refused = { refused: true, ...refusal(error) };
    }
    return {
      task: { id: task.id, state: task.status.state },
      made: { id: made.id, taskId: made.taskId, url: made.url },
      listed: listed.configs.map((c) => c.id),
      refused,
    };
  },
};

const client = await factory().createFromUrl(baseUrl);
try {
  console.log(JSON.stringify(await flows[flow](client)));
} catch (error) {
  console.log(JSON.stringify({ error: refusal(error) }));
  process.exitCode = 1;
}
