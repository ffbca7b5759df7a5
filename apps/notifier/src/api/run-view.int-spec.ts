import { randomBytes } from 'node:crypto';
import { ProjectDefinitionSchema } from '@baton/contracts';
import { runDecider, type RunCommand } from '@baton/domain';
import { startFixture, type NotifierFixture } from '../web/console-fixture.int-support';

/**
 * The run view (issue 14) through the API and the web page: a conversation run whose supervisor
 * handed off to a returnable child shows the waiting parent, each route with its rule and reason,
 * and its variables with the declared ones apart from the implicit ones.
 */

const loans = ProjectDefinitionSchema.parse({
  project: 'loans',
  agents: [
    {
      name: 'Loan_Supervisor',
      supervisor: true,
      memory: [{ name: 'annual_income', type: 'number' }],
      handoffs: [
        {
          to: 'Income_Capture_Agent',
          when: { kind: 'expression', source: 'annual_income IS NOT SET' },
          summary: "Collect the applicant's annual income, then return.",
          return: true,
          on_return: { action: 'continue', map: { annual_income: 'annual_income' } },
        },
      ],
    },
    { name: 'Income_Capture_Agent', gather: [{ name: 'annual_income', type: 'number' }] },
  ],
  workflows: [{ name: 'loan_session', version: 1, entry: 'converse', steps: [{ id: 'converse', agent: 'Loan_Supervisor', terminal: true }] }],
});

let fx: NotifierFixture;
let token: string;

async function startConversation(id: string): Promise<void> {
  const now = new Date(Date.UTC(2026, 1, 1, 10, 0)).toISOString();
  const command: RunCommand = {
    type: 'start_run',
    data: {
      workflow_run_id: id,
      project: 'loans',
      workflow: loans.workflows[0]!,
      agents: loans.agents,
      people: { started_by: 'sam', issue_author: null, trigger_author: null },
      variables: { channel: 'web', input: 'I want a loan offer' },
      input: 'I want a loan offer',
    },
    metadata: { now, actor: 'sam' },
  };
  const result = await fx.events.handleCommand({ project: 'loans', kind: 'run', id }, runDecider, command, {
    commandId: `cmd-${randomBytes(4).toString('hex')}`,
    occurredAt: now,
    actor: 'router',
    origin: 'engine_fallback',
    causationId: null,
    correlationId: id,
  });
  if (!result.ok) throw new Error(result.error.code);
}

async function signIn(bearer: string): Promise<string> {
  const page = await fetch(`${fx.base}/login`);
  const text = await page.text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(text)![1]!;
  const cookie = page.headers.get('set-cookie')!.split(';')[0]!;
  const done = await fetch(`${fx.base}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: new URLSearchParams({ _csrf: csrf, token: bearer, next: '/inbox' }).toString(),
    redirect: 'manual',
  });
  return done.headers
    .getSetCookie()
    .find((c) => c.startsWith('baton_session='))!
    .split(';')[0]!;
}

beforeAll(async () => {
  fx = await startFixture();
  token = await fx.token('vera', 'viewer', ['loans']);
  await startConversation('wr-loan');
  await fx.caughtUp();
}, 30_000);

afterAll(async () => {
  await fx?.close();
});

describe('the run view through the API and the web page (real NATS and Redis)', () => {
  it('GET /v1/projects/loans/runs/:id shows the waiting parent, each route with its rule and reason, and declared apart from implicit variables', async () => {
    const response = await fetch(`${fx.base}/v1/projects/loans/runs/wr-loan`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status).toBe(200);
    const { run } = (await response.json()) as { run: Record<string, unknown> };
    expect(run['waiting_parents']).toEqual([
      expect.objectContaining({
        agent: 'Loan_Supervisor',
        step: 'converse',
        child: 'Income_Capture_Agent',
        on_return: expect.objectContaining({ action: 'continue' }),
        original_utterance: 'I want a loan offer',
      }),
    ]);
    expect(run['routes']).toEqual([
      expect.objectContaining({
        outcome: 'dispatch',
        rule: 'handoff',
        reason: "returnable handoff Loan_Supervisor → Income_Capture_Agent: Collect the applicant's annual income, then return.",
        from: { agent: 'Loan_Supervisor', step: 'converse' },
        to: { agent: 'Income_Capture_Agent', step: 'converse' },
        handoff: { return_expected: true, route: 0 },
      }),
    ]);
    expect(run).toMatchObject({
      variables: { channel: 'web', input: 'I want a loan offer' },
      declared_variables: {},
      implicit_variables: { channel: 'web', input: 'I want a loan offer' },
      unset_declared_variables: ['annual_income'],
      pending_handoff: expect.objectContaining({ from: 'Loan_Supervisor', to: 'Income_Capture_Agent', return_expected: true }),
    });
  });

  it('the run page shows the waiting parent, the routes (rule and reason) and the variables in two tables', async () => {
    const cookie = await signIn(token);
    const page = await fetch(`${fx.base}/projects/loans/runs/wr-loan`, { headers: { cookie } });
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toMatch(/data-testid="waiting-parent"><td>Loan_Supervisor<\/td><td>converse<\/td><td>Income_Capture_Agent<\/td>/);
    expect(text).toMatch(/data-testid="route" data-rule="handoff">.*returnable handoff Loan_Supervisor → Income_Capture_Agent/s);
    expect(text).toContain('data-testid="declared-variables"');
    expect(text).toMatch(/data-testid="implicit-variables">.*<td>channel<\/td>.*<td>input<\/td>/s);
    expect(text).toContain('Not set yet: annual_income');
  });

  it('the OpenAPI document describes the new run view fields', async () => {
    const doc = (await (await fetch(`${fx.base}/openapi.json`)).json()) as Record<string, unknown>;
    const text = JSON.stringify(doc);
    for (const field of ['waiting_parents', 'declared_variables', 'implicit_variables', 'routes']) expect(text).toContain(field);
  });
});
