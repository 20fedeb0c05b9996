import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Browser } from 'playwright-core';
import { launchChromium } from '../support/browser';
import { PAGE_CONTENT_SECURITY_POLICY } from '../../src/common/static-page';
import { request, REST } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';

/** Screenshots land here (CI keeps test-artifacts/); look at them after a change to the page. */
const ARTIFACTS = resolve(__dirname, '../../test-artifacts');

const TYPE_OF_EXTENSION: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  png: 'image/png',
};

/** The page's own references: `src` of scripts and `href` of links. */
function assetsOf(html: string): string[] {
  return [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/g)].map(
    (match) => match[1],
  );
}

/** The REST API's OpenAPI description shown with Swagger UI at /svc/api/, served by the service. */
describe('the API page', () => {
  let service: TestService;
  let base: string;

  beforeAll(async () => {
    service = await startTestService();
    base = service.url;
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('answers the page under the strict Content-Security-Policy, whatever Accept says', async () => {
    const page = await request(`${base}/svc/api/`, { headers: { Accept: 'text/html' } });
    expect([page.status, page.headers.get('content-type')]).toEqual([
      200,
      'text/html; charset=utf-8',
    ]);
    expect(page.headers.get('content-security-policy')).toBe(PAGE_CONTENT_SECURITY_POLICY);
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(page.text).not.toMatch(/<script>|<style|style="/);
    const bare = await request(`${base}/svc/api`);
    expect([bare.status, bare.headers.get('location')]).toEqual([302, 'api/']);
  });

  it('serves every script and style sheet the page loads itself, with its type', async () => {
    const html = (await request(`${base}/svc/api/`)).text;
    const assets = assetsOf(html);
    expect(assets).toEqual(
      expect.arrayContaining([
        'swagger-ui/swagger-ui-bundle.js',
        'swagger-ui/swagger-ui.css',
        'api-page.js',
      ]),
    );
    for (const asset of assets) {
      const answer = await request(new URL(asset, `${base}/svc/api/`).href);
      const extension = asset.slice(asset.lastIndexOf('.') + 1);
      expect([asset, answer.status, answer.headers.get('content-type')]).toEqual([
        asset,
        200,
        TYPE_OF_EXTENSION[extension],
      ]);
      expect(answer.headers.get('content-security-policy')).toBe(PAGE_CONTENT_SECURITY_POLICY);
      expect(answer.body.length).toBeGreaterThan(100);
    }
    // Only the files the page uses: nothing else of the package, and no path out of it.
    for (const path of ['swagger-ui/package.json', 'swagger-ui/..%2Fpackage.json', 'nothing.js']) {
      expect([path, (await request(`${base}/svc/api/${path}`)).status]).toEqual([path, 404]);
    }
  });

  describe('in Chromium', () => {
    let browser: Browser;

    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(async () => {
      // The browser is a child of this process: close it before the service's leak check.
      await browser?.close();
    });

    it('renders every operation, with nothing refused by the policy or fetched elsewhere', async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const refused: string[] = [];
      const elsewhere: string[] = [];
      page.on('console', (message) => {
        if (/Content Security Policy/i.test(message.text())) {
          refused.push(message.text());
        }
      });
      page.on('pageerror', (error) => refused.push(error.message));
      page.on('request', (sent) => {
        if (!sent.url().startsWith(base) && !sent.url().startsWith('data:')) {
          elsewhere.push(sent.url());
        }
      });
      const response = await page.goto(`${base}/svc/api/`);
      expect(response?.status()).toBe(200);
      const document = JSON.parse((await request(`${base}${REST}/openapi.json`)).text) as {
        paths: Record<string, Record<string, unknown>>;
      };
      const operations = Object.values(document.paths).flatMap((item) => Object.keys(item));
      await page.locator('.opblock').first().waitFor({ state: 'visible', timeout: 30000 });
      expect(await page.locator('.opblock').count()).toBe(operations.length);
      expect(await page.locator('.info .title').textContent()).toContain('svc REST API');
      await page.locator('#operations-jobs-submitJob .opblock-summary-control').click();
      await page.locator('#operations-jobs-submitJob .parameters').first().waitFor();
      expect(await page.locator('#operations-jobs-submitJob').textContent()).toContain(
        'X-SVC-Application-Name',
      );
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'api-page.png') });
      expect(refused).toEqual([]);
      expect(elsewhere).toEqual([]);
      await context.close();
    });
  });
});
