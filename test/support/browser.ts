import { existsSync, readFileSync } from 'node:fs';
import { Browser, chromium, Page } from 'playwright-core';
import { Answer, request } from './rest-client';

/** Debian's Chromium, which the page tests drive; CHROMIUM_PATH names another. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/**
 * A headless Chromium with a new, empty profile of its own. It is a child of the test process:
 * close it before a service's check for leftover child processes.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH`,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

export interface AxeViolation {
  id: string;
  impact: string;
  help: string;
  nodes: Array<{ target: string[] }>;
}

/**
 * axe-core's rules of the given tags on the page as it is now. axe is injected as a script,
 * which the pages' Content-Security-Policy refuses: the context must bypass it (`bypassCSP`).
 */
export async function axeViolations(page: Page, tags: string[]): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate<AxeViolation[]>(
    `axe.run(document, { runOnly: ${JSON.stringify(tags)} }).then((r) => r.violations)`,
  );
}

/** A violation in one line: its rule, impact, help and where. */
export function violationText(v: AxeViolation): string {
  return `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`;
}

/**
 * Checks that each page file is served by the service itself: 200 with its type, the pages'
 * Content-Security-Policy, and no script or style from another origin. Sent with a browser's
 * Accept, one the REST API would refuse: the pages ignore Accept. Answers the files' answers.
 */
export async function expectPageFiles(base: string, files: string[][]): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (const [path, type] of files) {
    const answer = await request(`${base}${path}`, { headers: { Accept: 'text/html' } });
    expect([path, answer.status, answer.headers.get('content-type')]).toEqual([
      path,
      200,
      `${type}; charset=utf-8`,
    ]);
    expect(answer.headers.get('content-security-policy')).toMatch(/default-src 'self'/);
    expect(answer.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    answers.push(answer);
  }
  return answers;
}
