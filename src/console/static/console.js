// The operator console (docs/console.md): one script, no build step. Hash routes pick a view;
// each view reads the admin API with the browser's credentials (a session cookie after the
// identity provider's sign-in, or Basic) and is refetched when the service says jobs changed.
'use strict';

(function () {
  const REST = '/svc/api/rest';
  const ADMIN = `${REST}/admin`;
  /** Refetches of the view after a change come at most this often. */
  const REFRESH_DEBOUNCE_MS = 1000;
  /** While the event stream is down, the view is refetched this often (never faster than 5 s). */
  const FALLBACK_REFRESH_MS = 10000;
  const LOG_MAX_LINES = 2000;
  const PAGE_SIZE = 50;

  const $ = (id) => document.getElementById(id);
  const view = $('view');
  const heading = $('viewHeading');

  /** GET /admin/me: who is signed in and which applications they administer. */
  let me = null;
  /** The view on screen: its refresh() and stop(). */
  let current = null;
  let events = null;
  let refreshTimer = null;

  // ---- small helpers -----------------------------------------------------------------------

  /** An element with attributes (`on*` functions become listeners) and children. */
  function el(tag, attributes, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === undefined || value === null || value === false) {
        continue;
      }
      if (name.startsWith('on') && typeof value === 'function') {
        element.addEventListener(name.slice(2), value);
      } else if (name === 'text') {
        element.textContent = value;
      } else if (name === 'dataset') {
        Object.assign(element.dataset, value);
      } else if (value === true) {
        element.setAttribute(name, '');
      } else {
        element.setAttribute(name, String(value));
      }
    }
    for (const child of children.flat(Infinity)) {
      if (child !== null && child !== undefined && child !== false) {
        element.append(child);
      }
    }
    return element;
  }

  function formatTime(iso) {
    if (!iso) {
      return '–';
    }
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
  }

  function timeElement(iso) {
    return iso ? el('time', { datetime: iso, text: formatTime(iso) }) : '–';
  }

  function formatDuration(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) {
      return '–';
    }
    if (ms < 1000) {
      return `${Math.round(ms)} ms`;
    }
    if (ms < 60000) {
      return `${(ms / 1000).toFixed(1)} s`;
    }
    if (ms < 3600000) {
      return `${(ms / 60000).toFixed(1)} min`;
    }
    return `${(ms / 3600000).toFixed(1)} h`;
  }

  function between(from, to) {
    return from && to ? new Date(to).getTime() - new Date(from).getTime() : null;
  }

  /** `<input type="datetime-local">`'s value as ISO 8601 with a zone, or '' for none. */
  function isoOfLocal(value) {
    const date = value ? new Date(value) : null;
    return date && !Number.isNaN(date.getTime()) ? date.toISOString() : '';
  }

  function localOfIso(iso) {
    const date = iso ? new Date(iso) : null;
    if (!date || Number.isNaN(date.getTime())) {
      return '';
    }
    const shifted = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
    return shifted.toISOString().slice(0, 16);
  }

  /** THE address of a job, in the console, the upload page and the audit trail alike. */
  function jobHash(application, jobId) {
    return `#/jobs/${encodeURIComponent(application)}/${encodeURIComponent(jobId)}`;
  }

  function jobLink(application, jobId) {
    return el(
      'a',
      { href: jobHash(application, jobId), 'aria-label': `Job ${jobId} of ${application}` },
      el('code', { text: jobId.slice(0, 8) }),
    );
  }

  const OUTCOME_TEXT = {
    queued: 'Queued',
    running: 'Running',
    succeeded: 'Succeeded',
    failed: 'Failed',
    cancelled: 'Cancelled',
  };

  function outcomeBadge(outcome) {
    return el('span', { class: `badge ${outcome}`, text: OUTCOME_TEXT[outcome] || outcome });
  }

  /** A message line; role=alert for errors so that a screen reader says them at once. */
  function message(text, kind) {
    return el('p', {
      class: `message ${kind || ''}`,
      role: kind === 'error' ? 'alert' : 'status',
      text,
    });
  }

  function setMessage(box, text, kind) {
    box.replaceChildren(text ? message(text, kind) : '');
  }

  function table(caption, headers, rows, empty) {
    if (rows.length === 0) {
      return el('p', { class: 'empty', text: empty });
    }
    return el(
      'div',
      { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': caption },
      el(
        'table',
        {},
        el('caption', { text: caption }),
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            headers.map((h) => el('th', { scope: 'col', text: h })),
          ),
        ),
        el('tbody', {}, rows),
      ),
    );
  }

  /** A row whose cells carry their column's name (the narrow layout shows it before the value). */
  function row(headers, cells, attributes) {
    return el(
      'tr',
      attributes || {},
      cells.map((content, i) =>
        el('td', { 'data-label': headers[i] }, content === '' ? '–' : content),
      ),
    );
  }

  function field(id, label, control) {
    control.id = id;
    return el('div', { class: 'field' }, el('label', { for: id, text: label }), control);
  }

  function select(name, options, value) {
    return el(
      'select',
      { name },
      options.map(([optionValue, text]) =>
        el('option', { value: optionValue, text, selected: optionValue === value }),
      ),
    );
  }

  function button(text, onclick, attributes) {
    return el('button', { type: 'button', onclick, ...(attributes || {}) }, text);
  }

  function applicationOptions(withAll) {
    const options = me.applications.map((name) => [name, name]);
    return withAll ? [['', 'All applications'], ...options] : options;
  }

  // ---- the service ---------------------------------------------------------------------------

  /** A request to the service: `{ response, body }`, body being the parsed JSON or null. */
  async function call(url, options) {
    const init = { ...(options || {}) };
    init.headers = { Accept: 'application/json', ...(init.headers || {}) };
    if (init.json !== undefined) {
      init.body = JSON.stringify(init.json);
      init.headers['Content-Type'] = 'application/json';
      delete init.json;
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (error) {
      const failure = new Error(`The service could not be reached (${error.message}).`);
      failure.status = 0;
      throw failure;
    }
    const text = await response.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    return { response, body };
  }

  /** The service's words for a refused request (plain JSON's `message`). */
  function problem(answer) {
    const body = answer.body;
    const detail = body && (body.message || (body.error && body.error.message));
    return detail
      ? `${detail}`
      : `The service answered ${answer.response.status} ${answer.response.statusText}.`;
  }

  /** GET that must succeed: its body, or an Error with the service's message. */
  async function read(url, headers) {
    const answer = await call(url, { headers });
    if (!answer.response.ok) {
      const error = new Error(problem(answer));
      error.status = answer.response.status;
      throw error;
    }
    return answer.body;
  }

  const forApplication = (application) => ({ 'X-SVC-Application-Name': application });

  // ---- signing in ----------------------------------------------------------------------------

  async function start() {
    let session = null;
    try {
      const answer = await call('/svc/session');
      session = answer.response.ok ? answer.body : null;
    } catch {
      session = null;
    }
    if (session && session.signInAvailable && session.principal) {
      $('signOutForm').hidden = false;
    }
    let answer;
    try {
      answer = await call(`${ADMIN}/me`);
    } catch (error) {
      showGate(error.message);
      return;
    }
    if (answer.response.status === 401) {
      if (session && session.signInAvailable) {
        $('accountName').textContent = 'Not signed in';
        $('signInLink').hidden = false;
        showGate('Sign in to use the console.');
      } else {
        showGate('The service did not accept your credentials. Reload the page to sign in again.');
      }
      return;
    }
    if (answer.response.status === 403) {
      // The service's own words name the caller and say why ("user:bob is not an admin of any
      // application."); the page adds only what the console is for.
      $('accountName').textContent =
        session && session.principal ? `Signed in as ${session.principal}` : '';
      showGate(`The console is for admins: ${problem(answer)}`);
      return;
    }
    if (!answer.response.ok || !answer.body) {
      showGate(problem(answer));
      return;
    }
    me = answer.body;
    $('accountName').textContent =
      `Signed in as ${me.principal}${me.globalAdmin ? ' (global admin)' : ''}`;
    // Keys, settings and the audit trail are global admins' alone: others are not offered them
    // (their addresses still say so).
    for (const link of document.querySelectorAll('#nav a[data-global-admin]')) {
      link.parentElement.hidden = !me.globalAdmin;
    }
    $('nav').hidden = false;
    $('findJob').hidden = false;
    $('findJob').addEventListener('submit', (event) => {
      event.preventDefault();
      void findJob($('findJobId').value);
    });
    window.addEventListener('hashchange', route);
    listen();
    route();
  }

  function showGate(text) {
    heading.textContent = 'Operator console';
    view.replaceChildren(message(text, 'error'));
  }

  // ---- live changes ------------------------------------------------------------------------

  /** Jobs changing anywhere the caller may see: the view is refetched (debounced). */
  function listen() {
    events = new EventSource(`${ADMIN}/events`);
    events.addEventListener('jobs', () => scheduleRefresh(REFRESH_DEBOUNCE_MS));
    events.addEventListener('open', () => {
      $('liveState').textContent = 'Live: the view follows the jobs as they change.';
    });
    events.addEventListener('error', () => {
      $('liveState').textContent = 'Reconnecting to the service; the view is refreshed every 10 s.';
    });
    setInterval(() => {
      if (events.readyState !== EventSource.OPEN) {
        scheduleRefresh(0);
      }
    }, FALLBACK_REFRESH_MS);
  }

  /**
   * Refetches the live view on screen after `delay`, once. The refetch belongs to the view it was
   * asked for: a navigation cancels it (route), and a view that is not live (the settings, whose
   * text may hold an edit in progress against the version it was opened at) is never refetched.
   */
  function scheduleRefresh(delay) {
    if (refreshTimer !== null || !current || !current.live) {
      return;
    }
    const target = current;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      if (current === target && target.refresh) {
        target.refresh().catch(() => undefined);
      }
    }, delay);
  }

  function cancelRefresh() {
    if (refreshTimer !== null) {
      clearTimeout(refreshTimer);
      refreshTimer = null;
    }
  }

  // ---- routing -------------------------------------------------------------------------------

  const VIEWS = {
    overview: { title: 'Overview', render: overviewView },
    jobs: { title: 'Jobs', render: jobsView },
    schedules: { title: 'Schedules', render: schedulesView },
    keys: { title: 'API keys', render: keysView },
    settings: { title: 'Application settings', render: settingsView },
    audit: { title: 'Audit trail', render: auditView },
    packages: { title: 'R packages', render: packagesView },
    catalog: { title: 'Catalog', render: catalogView },
  };

  /** `#/jobs/demo/123?state=FAILED` → { parts: ['jobs','demo','123'], query }. */
  function parseHash() {
    const hash = location.hash.replace(/^#\/?/, '');
    const [path, search] = hash.split('?', 2);
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    return { parts, query: new URLSearchParams(search || '') };
  }

  function route() {
    if (current && current.stop) {
      current.stop();
    }
    cancelRefresh();
    current = null;
    const { parts, query } = parseHash();
    const name = parts[0] || 'overview';
    for (const link of document.querySelectorAll('#nav a')) {
      if (link.dataset.view === name) {
        link.setAttribute('aria-current', 'page');
      } else {
        link.removeAttribute('aria-current');
      }
    }
    let title;
    if (name === 'jobs' && parts.length === 3) {
      title = 'Job';
      current = jobView(parts[1], parts[2]);
    } else if (VIEWS[name]) {
      title = VIEWS[name].title;
      current = VIEWS[name].render(query);
    } else {
      title = 'Not found';
      view.replaceChildren(message(`The console has no view ${name}.`, 'error'));
    }
    heading.textContent = title;
    $('liveState').hidden = !(current && current.live);
    document.title = `${title} · svc console`;
    if (current) {
      view.replaceChildren(current.element);
      if (current.refresh) {
        current.refresh().catch(() => undefined);
      }
    }
    // After a link is followed, keyboard and screen reader users start at the new view's heading.
    if (document.activeElement && document.activeElement.closest('#nav, #view')) {
      heading.focus();
    }
  }

  function go(parts, query) {
    const search = query && query.toString();
    location.hash = `#/${parts.map(encodeURIComponent).join('/')}${search ? `?${search}` : ''}`;
  }

  /** A filter form: its values (times as ISO 8601) become the view's hash query. */
  function routeOnSubmit(form, viewName, names) {
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const next = new URLSearchParams();
      const data = new FormData(form);
      for (const name of names) {
        let value = String(data.get(name) || '').trim();
        if (name === 'from' || name === 'to') {
          value = isoOfLocal(value);
        }
        if (value) {
          next.set(name, value);
        }
      }
      go([viewName], next);
    });
  }

  /** The filters of `names` present in the hash query. */
  function filtersOf(query, names) {
    const params = new URLSearchParams();
    for (const name of names) {
      if (query.get(name)) {
        params.set(name, query.get(name));
      }
    }
    return params;
  }

  /** Runs `load` into `box`, showing the service's message when it fails. */
  async function fill(box, load) {
    try {
      box.replaceChildren(...[].concat(await load()));
    } catch (error) {
      box.replaceChildren(message(error.message, 'error'));
    }
  }

  // ---- charts (plain SVG) --------------------------------------------------------------------

  const SVG = 'http://www.w3.org/2000/svg';
  const SERIES_STYLE = [
    { colour: '#1f5fbf', dash: '' },
    { colour: '#a34700', dash: '6 4' },
  ];

  function svg(tag, attributes, ...children) {
    const element = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) {
      element.setAttribute(name, String(value));
    }
    element.append(...children);
    return element;
  }

  /**
   * A line chart as a picture: `series` [{ name, values }] over `times` (ISO strings); a null
   * value breaks the line; `whole`: the values are counts. Its text alternative says the latest
   * and the largest values.
   */
  function lineChart(id, title, times, series, format, whole) {
    const width = 420;
    const height = 220;
    const left = 60;
    const right = 12;
    const top = 12;
    const bottom = 30;
    const all = series.flatMap((s) => s.values).filter((v) => v !== null && v !== undefined);
    const highest = Math.max(1, ...all);
    // A count's ticks are whole numbers: its axis ends at a multiple of the four steps.
    const max = whole ? Math.max(4, Math.ceil(highest / 4) * 4) : highest;
    const n = Math.max(times.length - 1, 1);
    const x = (i) => left + ((width - left - right) * i) / n;
    const y = (v) => top + (height - top - bottom) * (1 - v / max);
    const parts = [];
    for (let tick = 0; tick <= 4; tick++) {
      const value = (max * tick) / 4;
      parts.push(
        svg('line', { x1: left, x2: width - right, y1: y(value), y2: y(value), class: 'grid' }),
        svg('text', { x: left - 6, y: y(value) + 4, 'text-anchor': 'end' }, format(value)),
      );
    }
    for (const [i, anchor] of [
      [0, 'start'],
      [Math.floor(n / 2), 'middle'],
      [n, 'end'],
    ]) {
      if (times[i]) {
        const label = new Date(times[i]).toLocaleTimeString([], {
          hour: '2-digit',
          minute: '2-digit',
        });
        parts.push(svg('text', { x: x(i), y: height - 8, 'text-anchor': anchor }, label));
      }
    }
    series.forEach((s, index) => {
      let d = '';
      let pen = false;
      s.values.forEach((v, i) => {
        if (v === null || v === undefined) {
          pen = false;
          return;
        }
        d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
        pen = true;
      });
      const style = SERIES_STYLE[index % SERIES_STYLE.length];
      if (d) {
        parts.push(
          svg('path', {
            d,
            fill: 'none',
            stroke: style.colour,
            'stroke-width': 2,
            'stroke-dasharray': style.dash || 'none',
          }),
        );
      }
      // A lone point between gaps is drawn as a dot.
      s.values.forEach((v, i) => {
        const alone =
          v !== null &&
          v !== undefined &&
          (s.values[i - 1] === null || s.values[i - 1] === undefined) &&
          (s.values[i + 1] === null || s.values[i + 1] === undefined);
        if (alone) {
          parts.push(svg('circle', { cx: x(i), cy: y(v), r: 3, fill: style.colour }));
        }
      });
    });
    const summary = series
      .map((s) => {
        const known = s.values.filter((v) => v !== null && v !== undefined);
        return known.length === 0
          ? `${s.name}: no data`
          : `${s.name}: latest ${format(known[known.length - 1])}, highest ${format(Math.max(...known))}`;
      })
      .join('; ');
    const picture = svg(
      'svg',
      {
        viewBox: `0 0 ${width} ${height}`,
        role: 'img',
        'aria-labelledby': `${id}-title ${id}-desc`,
        class: 'chart',
      },
      svg('title', { id: `${id}-title` }, title),
      svg('desc', { id: `${id}-desc` }, summary),
      ...parts,
    );
    const legend = el(
      'ul',
      { class: 'legend' },
      series.map((s, index) => {
        const style = SERIES_STYLE[index % SERIES_STYLE.length];
        const swatch = svg(
          'svg',
          { width: 28, height: 10, 'aria-hidden': 'true' },
          svg('line', {
            x1: 0,
            x2: 28,
            y1: 5,
            y2: 5,
            stroke: style.colour,
            'stroke-width': 3,
            'stroke-dasharray': style.dash || 'none',
          }),
        );
        return el('li', {}, swatch, s.name);
      }),
    );
    return el(
      'figure',
      { class: 'chart-figure', id },
      el('figcaption', { text: title }),
      picture,
      legend,
    );
  }

  // ---- Overview ------------------------------------------------------------------------------

  function overviewView(query) {
    const period = query.get('period') === 'day' ? 'day' : 'hour';
    const applications = el('div', {}, 'Loading…');
    const charts = el('div', { class: 'charts' });
    const workers = el('div', {});
    const periodLinks = el(
      'p',
      { class: 'tabs' },
      'Charts over ',
      ['hour', 'day'].map((p) =>
        el('a', {
          href: p === 'hour' ? '#/overview' : '#/overview?period=day',
          'aria-current': p === period ? 'true' : false,
          text: p === 'hour' ? 'the last hour' : 'the last day',
        }),
      ),
    );
    const element = el(
      'div',
      {},
      el('section', { 'aria-labelledby': 'appsHeading' }, [
        el('h2', { id: 'appsHeading', text: 'Applications' }),
        applications,
      ]),
      el('section', { 'aria-labelledby': 'chartsHeading' }, [
        el('h2', { id: 'chartsHeading', text: 'Wait, run time and queue' }),
        periodLinks,
        charts,
      ]),
      el('section', { 'aria-labelledby': 'workersHeading' }, [
        el('h2', { id: 'workersHeading', text: 'Workers' }),
        workers,
      ]),
    );
    async function refresh() {
      let overview;
      try {
        overview = await read(`${ADMIN}/overview`);
      } catch (error) {
        applications.replaceChildren(message(error.message, 'error'));
        return;
      }
      const appHeaders = [
        'Application',
        'Queued',
        'Running',
        'Done (last hour)',
        'Failed (last hour)',
      ];
      applications.replaceChildren(
        table(
          'Jobs per application',
          appHeaders,
          overview.applications.map((a) =>
            row(
              appHeaders,
              [
                el('a', {
                  href: `#/jobs?application=${encodeURIComponent(a.application)}`,
                  text: a.application,
                }),
                String(a.queued),
                String(a.running),
                String(a.succeededLastHour),
                String(a.failedLastHour),
              ],
              { 'data-application': a.application },
            ),
          ),
          'No application has jobs yet.',
        ),
      );
      const series = overview.series[period];
      const times = series.buckets.map((b) => b.at);
      const pick = (key) => series.buckets.map((b) => b[key]);
      const span = period === 'hour' ? 'last hour' : 'last day';
      charts.replaceChildren(
        lineChart(
          'chartWait',
          `Wait time, submission to start (${span})`,
          times,
          [
            { name: 'median (p50)', values: pick('waitP50Ms') },
            { name: '95th percentile (p95)', values: pick('waitP95Ms') },
          ],
          formatDuration,
        ),
        lineChart(
          'chartRun',
          `Run time (${span})`,
          times,
          [
            { name: 'median (p50)', values: pick('runP50Ms') },
            { name: '95th percentile (p95)', values: pick('runP95Ms') },
          ],
          formatDuration,
        ),
        lineChart(
          'chartThroughput',
          `Jobs done and failed per ${period === 'hour' ? 'minute' : '15 minutes'} (${span})`,
          times,
          [
            { name: 'done', values: pick('succeeded') },
            { name: 'failed', values: pick('failed') },
          ],
          (v) => String(Math.round(v)),
          true,
        ),
        lineChart(
          'chartQueue',
          `Queue depth (${span})`,
          times,
          [{ name: 'jobs queued', values: pick('queueDepth') }],
          (v) => String(Math.round(v)),
          true,
        ),
      );
      const workerHeaders = [
        'Node',
        'Role',
        'Version',
        'R engine',
        'Slots',
        'Running jobs',
        'Started',
        'Memory',
        'Last heartbeat',
      ];
      workers.replaceChildren(
        table(
          'Worker nodes and their slots',
          workerHeaders,
          overview.workers.map((w) =>
            row(
              workerHeaders,
              [
                el('code', { text: w.node }),
                w.role,
                w.version || '–',
                w.rEngine,
                slotBar(w),
                runningJobsCell(w),
                w.startedAt ? timeElement(w.startedAt) : '–',
                w.memoryBytes === null ? '–' : formatBytes(w.memoryBytes),
                el('span', {}, timeElement(w.heartbeatAt), w.stale ? ' (stale)' : ''),
              ],
              { 'data-node': w.node },
            ),
          ),
          'No worker node has reported.',
        ),
      );
    }
    return { element, refresh, live: true };
  }

  /** A worker's running jobs the caller may see, each a link with how long it has run. */
  function runningJobsCell(worker) {
    if (worker.runningJobs.length === 0) {
      return worker.busy > 0 ? 'of other applications' : '–';
    }
    return el(
      'ul',
      { class: 'runs' },
      worker.runningJobs.map((job) =>
        el(
          'li',
          {},
          jobLink(job.applicationName, job.jobId),
          ` ${job.applicationName}, ${elapsedText(job.startedAt)}`,
        ),
      ),
    );
  }

  /** Bytes in binary units, as memory is usually told. */
  function formatBytes(bytes) {
    const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return unit === 0 ? `${bytes} bytes` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
  }

  /** Busy and free slots as a bar and in words. */
  function slotBar(worker) {
    const cells = [];
    for (let i = 0; i < worker.slots; i++) {
      cells.push(el('span', { class: i < worker.busy ? 'slot busy' : 'slot free' }));
    }
    return el(
      'span',
      { class: 'slots' },
      el('span', { class: 'slot-cells', 'aria-hidden': 'true' }, cells),
      ` ${worker.busy} busy, ${worker.free} free`,
    );
  }

  // ---- Jobs ----------------------------------------------------------------------------------

  const JOB_FILTERS = ['id', 'application', 'state', 'kind', 'source', 'principal', 'from', 'to'];

  /**
   * From any view: a job id, or its first characters, opens the job when one job the caller may
   * see has it, else the list of those that do (or the service's word on what was typed).
   */
  async function findJob(value) {
    const id = value.trim();
    if (!id) {
      return;
    }
    let page = null;
    try {
      page = await read(`${ADMIN}/jobs?${new URLSearchParams({ id, limit: '2' })}`);
    } catch {
      page = null;
    }
    if (page && page.jobs.length === 1) {
      location.hash = jobHash(page.jobs[0].applicationName, page.jobs[0].jobId);
    } else {
      go(['jobs'], new URLSearchParams({ id }));
    }
  }

  function jobsView(query) {
    const form = el('form', { class: 'filters', 'aria-label': 'Filter the jobs' });
    form.append(
      field(
        'jobsId',
        'Job id (or its first characters)',
        el('input', {
          name: 'id',
          value: query.get('id') || '',
          autocomplete: 'off',
          spellcheck: 'false',
          maxlength: '36',
        }),
      ),
      field(
        'jobsApplication',
        'Application',
        select('application', applicationOptions(true), query.get('application') || ''),
      ),
      field(
        'jobsState',
        'State',
        select(
          'state',
          [
            ['', 'Any'],
            ['QUEUED', 'Queued'],
            ['RUNNING', 'Running'],
            ['DONE', 'Done'],
            ['SUCCEEDED', 'Succeeded'],
            ['FAILED', 'Failed'],
            ['CANCELLED', 'Cancelled'],
          ],
          query.get('state') || '',
        ),
      ),
      field(
        'jobsKind',
        'Kind',
        select(
          'kind',
          [
            ['', 'Any'],
            ['script', 'Script'],
            ['xml', 'XML call'],
            ['json', 'JSON call'],
          ],
          query.get('kind') || '',
        ),
      ),
      field(
        'jobsSource',
        'Source',
        select(
          'source',
          [
            ['', 'Any'],
            ...['rest', 'form', 'soap', 'directory', 'email', 'schedule'].map((s) => [s, s]),
          ],
          query.get('source') || '',
        ),
      ),
      field(
        'jobsPrincipal',
        'Submitted by',
        el('input', {
          name: 'principal',
          value: query.get('principal') || '',
          placeholder: 'user:alice',
        }),
      ),
      field(
        'jobsFrom',
        'Submitted from',
        el('input', { type: 'datetime-local', name: 'from', value: localOfIso(query.get('from')) }),
      ),
      field(
        'jobsTo',
        'Submitted before',
        el('input', { type: 'datetime-local', name: 'to', value: localOfIso(query.get('to')) }),
      ),
      el('div', { class: 'form-actions' }, el('button', { type: 'submit', text: 'Show jobs' })),
    );
    routeOnSubmit(form, 'jobs', JOB_FILTERS);
    const note = el('div', { class: 'notes' });
    const list = el('div', {}, 'Loading…');
    const summary = el('p', { id: 'jobsTotal', class: 'help' });
    const pager = el('div', { class: 'pager' });
    /** The page's number (1: the first), carried in the address with its cursor. */
    const pageNumber = query.get('cursor') ? Math.max(2, Number(query.get('page')) || 2) : 1;
    const bulk = el(
      'p',
      { class: 'row-actions' },
      button('Cancel the queued and running jobs that match', () => void cancelMatching(), {
        class: 'danger',
      }),
      button('Retry the failed jobs that match', () => void retryMatching()),
    );
    const element = el('div', {}, form, bulk, note, summary, list, pager);

    /** Jobs a page: 50, or the address's `limit` (1 to 200), which the page links keep. */
    const pageSize = Math.min(
      200,
      Math.max(1, Math.floor(Number(query.get('limit'))) || PAGE_SIZE),
    );
    const filterQuery = () => {
      const params = filtersOf(query, JOB_FILTERS);
      if (pageSize !== PAGE_SIZE) {
        params.set('limit', String(pageSize));
      }
      return params;
    };

    /** The filter in the address as a bulk action's body (its state: the action's own). */
    function bulkBody() {
      const body = {};
      for (const name of JOB_FILTERS) {
        if (query.get(name) && name !== 'state') {
          body[name] = query.get(name);
        }
      }
      return body;
    }

    /** Asks the count first, so the confirmation names it; then retries that many at most. */
    async function retryMatching() {
      const body = bulkBody();
      const counted = await call(`${ADMIN}/jobs/retry`, {
        method: 'POST',
        json: { ...body, dryRun: true },
      });
      if (!counted.response.ok) {
        setMessage(note, problem(counted), 'error');
        return;
      }
      const { failed, capped } = counted.body;
      if (failed === 0) {
        setMessage(note, 'No failed job matches the filter: nothing to retry.');
        return;
      }
      const limit = Math.min(failed, 1000);
      const what = `${capped ? 'more than ' : ''}${failed.toLocaleString()} failed job${failed === 1 && !capped ? '' : 's'}`;
      if (
        !window.confirm(
          `Retry ${what} that match${failed === 1 && !capped ? 'es' : ''} the filter?` +
            (limit < failed || capped ? ` The first ${limit} are retried now.` : ''),
        )
      ) {
        return;
      }
      const answer = await call(`${ADMIN}/jobs/retry`, {
        method: 'POST',
        json: { ...body, limit },
      });
      if (!answer.response.ok) {
        setMessage(note, problem(answer), 'error');
        return;
      }
      const { retried, queueFull, notRetryable, more } = answer.body;
      const parts = [`Retried ${retried} failed job${retried === 1 ? '' : 's'}.`];
      for (const full of queueFull) {
        parts.push(
          `${full.skipped} of ${full.application} not retried: it has ${full.maxQueuedJobs} job${full.maxQueuedJobs === 1 ? '' : 's'} queued, its limit (maxQueuedJobs).`,
        );
      }
      if (notRetryable > 0) {
        parts.push(`${notRetryable} not retried: they failed before their input files were kept.`);
      }
      if (more) {
        parts.push('More match: press again.');
      }
      setMessage(note, parts.join(' '));
      await refresh();
    }

    async function cancelMatching() {
      const body = bulkBody();
      const state = query.get('state');
      body.state = state === 'QUEUED' || state === 'RUNNING' ? state : 'QUEUED,RUNNING';
      if (!window.confirm('Cancel every queued and running job that matches the filter?')) {
        return;
      }
      const answer = await call(`${ADMIN}/jobs/cancel`, { method: 'POST', json: body });
      if (!answer.response.ok) {
        setMessage(note, problem(answer), 'error');
        return;
      }
      const { cancelled, more } = answer.body;
      setMessage(
        note,
        `Cancelled ${cancelled} job${cancelled === 1 ? '' : 's'}${more ? '; more match: press again' : ''}.`,
      );
      await refresh();
    }

    async function refresh() {
      const params = filterQuery();
      params.set('limit', String(pageSize));
      if (query.get('cursor')) {
        params.set('cursor', query.get('cursor'));
      }
      let page;
      try {
        page = await read(`${ADMIN}/jobs?${params}`);
      } catch (error) {
        list.replaceChildren(message(error.message, 'error'));
        return;
      }
      const headers = [
        'Job',
        'Application',
        'Outcome',
        'Kind',
        'Function',
        'Source',
        'Submitted',
        'Wait',
        'Run time',
        'Submitted by',
        'Actions',
      ];
      list.replaceChildren(
        table(
          'Jobs, newest first',
          headers,
          page.jobs.map((job) =>
            row(
              headers,
              [
                jobLink(job.applicationName, job.jobId),
                job.applicationName,
                outcomeBadge(job.outcome),
                job.kind,
                functionCell(job),
                job.source,
                timeElement(job.submittedAt),
                formatDuration(between(job.submittedAt, job.startedAt)),
                formatDuration(between(job.startedAt, job.finishedAt)),
                job.submittedBy || '–',
                jobActionCell(job, (text, kind) => setMessage(note, text, kind), refresh),
              ],
              { 'data-job-id': job.jobId, 'data-outcome': job.outcome },
            ),
          ),
          'No job matches.',
        ),
      );
      const pages = Math.max(1, Math.ceil(page.total / pageSize));
      const first = (pageNumber - 1) * pageSize;
      summary.textContent =
        page.total === 0
          ? ''
          : `${page.totalCapped ? 'More than ' : ''}${page.total.toLocaleString()} job${page.total === 1 && !page.totalCapped ? '' : 's'} match; ` +
            `${first + 1}–${first + page.jobs.length} shown, page ${pageNumber} of ${page.totalCapped ? `more than ${pages}` : pages}.`;
      const links = [];
      if (query.get('cursor')) {
        links.push(el('a', { href: `#/jobs?${filterQuery()}`, text: 'First page' }));
      }
      if (page.next) {
        const next = filterQuery();
        next.set('cursor', page.next);
        next.set('page', String(pageNumber + 1));
        links.push(el('a', { href: `#/jobs?${next}`, text: `Next page (${pageNumber + 1})` }));
      }
      pager.replaceChildren(...links);
    }
    return { element, refresh, live: true };
  }

  /** A function call's R function as code, or a dash (a script job). */
  function functionCell(job) {
    return job.functionName ? el('code', { text: job.functionName }) : '–';
  }

  /** A job's buttons in its row of the list, or a dash. */
  function jobActionCell(job, say, after) {
    const buttons = jobActions(job, say, after);
    return buttons.length ? el('span', { class: 'row-actions' }, buttons) : '–';
  }

  /** Cancel (queued, running), retry (failed): the buttons of a job, in the list and its page. */
  function jobActions(job, say, after) {
    const label = `job ${job.jobId}`;
    const buttons = [];
    if (job.outcome === 'queued' || job.outcome === 'running') {
      buttons.push(
        button('Cancel', () => void cancelJob(job, say, after), {
          class: 'danger',
          'aria-label': `Cancel ${label}`,
        }),
      );
    }
    if (job.outcome === 'failed') {
      buttons.push(
        button('Retry', () => void retryJob(job, say, after), { 'aria-label': `Retry ${label}` }),
      );
    }
    return buttons;
  }

  /** The console's address of a job in the admin API. */
  function adminJobUrl(job) {
    return `${ADMIN}/jobs/${encodeURIComponent(job.applicationName)}/${encodeURIComponent(job.jobId)}`;
  }

  /** Through the console's API, so that the cancel is recorded as the signed-in admin. */
  async function cancelJob(job, say, after) {
    const answer = await call(`${adminJobUrl(job)}/cancel`, { method: 'POST' });
    if (answer.response.ok) {
      say(`Job ${job.jobId} cancelled.`);
    } else if (answer.response.status === 409) {
      say(`Job ${job.jobId} had already finished.`);
    } else {
      say(problem(answer), 'error');
    }
    await after();
  }

  async function retryJob(job, say, after) {
    const answer = await call(`${adminJobUrl(job)}/retry`, { method: 'POST' });
    if (answer.response.ok) {
      say(`Job ${job.jobId} is queued again.`);
    } else {
      say(problem(answer), 'error');
    }
    await after();
  }

  // ---- one job -------------------------------------------------------------------------------

  function jobView(application, jobId) {
    const facts = el('div', {}, 'Loading…');
    const actions = el('div', { class: 'actions' });
    const note = el('div', {});
    const logBox = el('pre', {
      id: 'jobLog',
      class: 'log',
      role: 'log',
      tabindex: '0',
      'aria-label': 'What R printed',
    });
    const logCount = el('span', {});
    const progress = el('p', { id: 'jobProgress', class: 'help' });
    const resultBox = el('div', {});
    const inputsBox = el('div', { id: 'jobInputs' });
    const element = el(
      'div',
      { id: 'jobDetail' },
      facts,
      actions,
      note,
      progress,
      el('section', { 'aria-labelledby': 'inputsHeading' }, [
        el('h2', { id: 'inputsHeading', text: 'Input files' }),
        inputsBox,
      ]),
      el('section', { 'aria-labelledby': 'logHeading' }, [
        el('h2', { id: 'logHeading' }, 'What R printed ', logCount),
        logBox,
      ]),
      el('section', { 'aria-labelledby': 'resultHeading' }, [
        el('h2', { id: 'resultHeading', text: 'Result' }),
        resultBox,
      ]),
    );
    let stream = null;
    let streamEnded = false;
    let resultShown = false;
    let stopped = false;
    let ticker = null;
    const url = `${ADMIN}/jobs/${encodeURIComponent(application)}/${encodeURIComponent(jobId)}`;

    function followLog(job) {
      let lines = 0;
      streamEnded = false;
      logBox.textContent = '';
      logCount.textContent = '';
      stream = new EventSource(job.links.log);
      stream.addEventListener('line', (event) => {
        const data = JSON.parse(event.data);
        lines += 1;
        logBox.append(`${data.stream === 'stderr' ? '! ' : ''}${data.line}\n`);
        while (logBox.childNodes.length > LOG_MAX_LINES) {
          logBox.firstChild.remove();
        }
        logCount.textContent = `(${lines} line${lines === 1 ? '' : 's'})`;
        logBox.scrollTop = logBox.scrollHeight;
      });
      stream.addEventListener('progress', (event) => {
        showProgress(JSON.parse(event.data));
      });
      // The stream ends once the job is done and every line was sent: the job is read again.
      stream.addEventListener('end', () => {
        stream.close();
        streamEnded = true;
        void refresh();
      });
    }

    function showProgress(p) {
      progress.textContent = p
        ? `Progress: ${Math.round(p.fraction * 100)} %${p.message ? `: ${p.message}` : ''}`
        : '';
    }

    async function refresh() {
      let job;
      try {
        job = await read(url);
      } catch (error) {
        facts.replaceChildren(message(error.message, 'error'));
        return;
      }
      if (stopped) {
        return;
      }
      heading.textContent = `Job ${job.jobId}`;
      facts.replaceChildren(jobFacts(job));
      inputsBox.replaceChildren(inputFiles(job));
      // A running job's run time counts up each second on the page, without asking the service.
      clearInterval(ticker);
      if (job.state === 'RUNNING' && job.startedAt) {
        ticker = setInterval(() => {
          const elapsed = $('jobElapsed');
          if (elapsed) {
            elapsed.textContent = elapsedText(job.startedAt);
          }
        }, 1000);
      }
      facts.dataset.outcome = job.outcome;
      actions.replaceChildren(
        ...jobActions(job, (text, kind) => setMessage(note, text, kind), refresh),
      );
      if (job.outcome === 'succeeded' || job.outcome === 'failed' || job.outcome === 'cancelled') {
        actions.append(
          button('Delete the result', () => void deleteResult(job), {
            class: 'danger',
            'aria-label': `Delete the result of job ${job.jobId}`,
          }),
        );
      }
      // A job's progress is a note about its run: it goes when the run ends.
      showProgress(job.state === 'DONE' ? null : job.progress);
      // A job queued again (retried) prints anew: its log is followed again.
      if (stream === null || (streamEnded && job.state !== 'DONE')) {
        followLog(job);
      }
      if (job.state === 'DONE' && !resultShown) {
        resultShown = true;
        await showResult(job);
      } else if (job.state !== 'DONE') {
        resultShown = false;
        resultBox.replaceChildren(
          el('p', { class: 'help', text: 'The result is here once the job is done.' }),
        );
      }
    }

    async function deleteResult(job) {
      if (!window.confirm(`Delete the result of job ${job.jobId}? This cannot be undone.`)) {
        return;
      }
      const answer = await call(
        `${REST}/results/${encodeURIComponent(job.applicationName)}/${encodeURIComponent(job.jobId)}`,
        { method: 'DELETE' },
      );
      if (answer.response.status === 204) {
        setMessage(note, `Deleted the result of job ${job.jobId}.`);
        resultBox.replaceChildren(el('p', { text: 'The result was deleted.' }));
      } else {
        setMessage(note, problem(answer), 'error');
      }
    }

    async function showResult(job) {
      const answer = await call(
        `${REST}/results/${encodeURIComponent(job.applicationName)}/${encodeURIComponent(job.jobId)}`,
      );
      if (!answer.response.ok || !answer.body) {
        resultBox.replaceChildren(
          message(problem(answer), answer.response.status === 404 ? '' : 'error'),
        );
        return;
      }
      const result = answer.body;
      const download = el('a', {
        class: 'button',
        href: result.dataUri,
        download: '',
        text: `Download the result (${String(result.type).toUpperCase()})`,
      });
      if (!result.success) {
        const text = await fetch(result.dataUri).then((r) => (r.ok ? r.text() : ''));
        resultBox.replaceChildren(
          el('p', {}, download),
          el('pre', {
            id: 'jobFailure',
            class: 'failure',
            role: 'region',
            tabindex: '0',
            'aria-label': 'What went wrong',
            text,
          }),
        );
        return;
      }
      const list = el('ul', { id: 'previewFiles', class: 'preview-files' });
      const previewMessage = el('p', { id: 'previewMessage', class: 'help' });
      resultBox.replaceChildren(el('p', {}, download), previewMessage, list);
      if (result.type === 'zip') {
        await window.svcResultPreview.show(result, {
          list,
          message: previewMessage,
          isCurrent: () => !stopped,
          describeError: (response) => `The result could not be read (${response.status}).`,
        });
      }
    }

    function stop() {
      stopped = true;
      clearInterval(ticker);
      if (stream) {
        stream.close();
      }
    }
    return { element, refresh, stop, live: true };
  }

  /** A job's input files kept, each with its size and download; or why there are none. */
  function inputFiles(job) {
    const { files, total } = job.inputFiles;
    if (total === 0) {
      return el('p', {
        class: 'empty',
        text:
          job.outcome === 'succeeded' || job.outcome === 'cancelled'
            ? 'None kept: a job’s input files are removed once it succeeds or is cancelled.'
            : 'None.',
      });
    }
    const headers = ['File', 'Size'];
    return el(
      'div',
      {},
      table(
        total > files.length
          ? `Input files: the first ${files.length} of ${total} by name`
          : `Input files (${total})`,
        headers,
        files.map((file) =>
          row(headers, [
            el('a', {
              href: file.uri,
              download: file.name.split('/').pop(),
              text: file.name,
            }),
            formatBytes(file.size),
          ]),
        ),
        'None.',
      ),
    );
  }

  /** How long a running job has run, by this browser's clock. */
  function elapsedText(startedAt) {
    return `running for ${formatDuration(Math.max(0, Date.now() - new Date(startedAt).getTime()))}`;
  }

  function jobFacts(job) {
    const rows = [
      ['Job id', el('code', { text: job.jobId })],
      ['Application', job.applicationName],
      ['Outcome', outcomeBadge(job.outcome)],
      ['Kind', job.kind],
      ['Function', functionCell(job)],
      ['Source', job.source],
      ['Priority', String(job.priority)],
      ['Submitted by', job.submittedBy || '–'],
      ['Submitted', timeElement(job.submittedAt)],
      ['Started', timeElement(job.startedAt)],
      ['Finished', timeElement(job.finishedAt)],
      ['Wait', formatDuration(between(job.submittedAt, job.startedAt))],
      [
        'Run time',
        job.state === 'RUNNING' && job.startedAt
          ? el('span', { id: 'jobElapsed', text: elapsedText(job.startedAt) })
          : formatDuration(between(job.startedAt, job.finishedAt)),
      ],
      ['Attempts', String(job.attempts)],
      ['Lost runs', String(job.lostRuns)],
    ];
    if (job.lastError) {
      rows.push(['Last error', job.lastError]);
    }
    if (job.cancelledBy) {
      rows.push(['Cancelled by', job.cancelledBy]);
    }
    const meta = Object.entries(job.meta || {});
    return el(
      'div',
      { class: 'job-facts' },
      el(
        'dl',
        { class: 'facts' },
        rows.map(([name, value]) => [el('dt', { text: name }), el('dd', {}, value)]),
      ),
      el('h2', { text: 'Meta parameters' }),
      meta.length === 0
        ? el('p', { class: 'empty', text: 'None.' })
        : el(
            'dl',
            { class: 'facts' },
            meta.map(([name, value]) => [
              el('dt', {}, el('code', { text: name })),
              el('dd', { text: String(value) }),
            ]),
          ),
    );
  }

  // ---- Schedules -----------------------------------------------------------------------------

  function schedulesView() {
    const note = el('div', {});
    const list = el('div', {}, 'Loading…');
    const element = el('div', {}, note, list);
    async function refresh() {
      const sections = await Promise.all(me.applications.map((app) => applicationSchedules(app)));
      const shown = sections.filter(Boolean);
      list.replaceChildren(
        ...(shown.length
          ? shown
          : [el('p', { class: 'empty', text: 'No application has schedules.' })]),
      );
    }
    async function applicationSchedules(app) {
      let schedules;
      let runs;
      try {
        [schedules, runs] = await Promise.all([
          read(`${ADMIN}/schedules`, forApplication(app)),
          read(`${ADMIN}/jobs?application=${encodeURIComponent(app)}&source=schedule&limit=200`),
        ]);
      } catch (error) {
        return error.status === 404
          ? null
          : el('section', {}, el('h2', { text: app }), message(error.message, 'error'));
      }
      if (schedules.schedules.length === 0) {
        return null;
      }
      const headers = ['Name', 'When', 'State', 'Next run', 'Last runs', 'Actions'];
      return el(
        'section',
        { 'aria-label': `Schedules of ${app}` },
        el('h2', { text: app }),
        table(
          `Schedules of ${app}`,
          headers,
          schedules.schedules.map((s) => {
            const jobs = runs.jobs
              .filter((job) => job.meta && job.meta.scheduleId === s.id)
              .slice(0, 5);
            const last = s.lastRun;
            const lastRuns = el(
              'ul',
              { class: 'runs' },
              jobs.map((job) =>
                el(
                  'li',
                  {},
                  jobLink(app, job.jobId),
                  ' ',
                  outcomeBadge(job.outcome),
                  ' ',
                  timeElement(job.submittedAt),
                ),
              ),
              last && last.error
                ? el('li', { class: 'error-text', text: `Last run refused: ${last.error}` })
                : null,
            );
            const toggle = s.paused
              ? button('Resume', () => void setPaused(app, s, false), {
                  'aria-label': `Resume schedule ${s.name}`,
                })
              : button('Pause', () => void setPaused(app, s, true), {
                  'aria-label': `Pause schedule ${s.name}`,
                });
            return row(
              headers,
              [
                s.name,
                el('span', {}, el('code', { text: s.cron }), ` (${s.timeZone})`),
                s.paused ? 'Paused' : 'Active',
                s.paused ? 'none while paused' : timeElement(s.nextRunTime),
                jobs.length || (last && last.error) ? lastRuns : 'none yet',
                toggle,
              ],
              { 'data-schedule': s.name },
            );
          }),
          '',
        ),
      );
    }
    async function setPaused(app, schedule, paused) {
      const answer = await call(
        `${ADMIN}/schedules/${encodeURIComponent(schedule.id)}/${paused ? 'pause' : 'resume'}`,
        { method: 'POST', headers: forApplication(app) },
      );
      if (answer.response.ok) {
        setMessage(note, `Schedule ${schedule.name} ${paused ? 'paused' : 'resumed'}.`);
      } else {
        setMessage(note, problem(answer), 'error');
      }
      await refresh();
    }
    return { element, refresh, live: true };
  }

  // ---- API keys ------------------------------------------------------------------------------

  function globalOnly(what) {
    return {
      element: el(
        'div',
        {},
        message(
          `Only global admins manage ${what}; you administer ${me.applications.join(', ') || 'no application'}.`,
        ),
      ),
    };
  }

  function keysView() {
    if (!me.globalAdmin) {
      return globalOnly('API keys');
    }
    const created = el('div', {});
    const note = el('div', {});
    const list = el('div', {}, 'Loading…');
    const form = el(
      'form',
      { class: 'filters', 'aria-labelledby': 'newKeyHeading' },
      field(
        'keyPrincipal',
        'Principal (who the key signs in as)',
        el('input', { name: 'principal', required: true, autocomplete: 'off' }),
      ),
      field(
        'keyRoles',
        'Roles (comma-separated)',
        el('input', { name: 'roles', autocomplete: 'off' }),
      ),
      field(
        'keyExpires',
        'Expires (optional)',
        el('input', { type: 'datetime-local', name: 'expiresAt' }),
      ),
      el(
        'div',
        { class: 'form-actions' },
        el('button', { type: 'submit', text: 'Create the key' }),
      ),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void create();
    });
    // Said before a key is made: in a mode without apiKey the service refuses every key.
    const refused = me.apiKeysAccepted
      ? null
      : el(
          'p',
          { id: 'keysRefused', class: 'message warning', role: 'note' },
          'AUTH_MODE does not let API keys in: a key made here is stored, but the service refuses every request that sends it until AUTH_MODE includes apiKey.',
        );
    const element = el(
      'div',
      {},
      el('section', {}, el('h2', { id: 'newKeyHeading', text: 'New key' }), refused, form, created),
      el('section', {}, el('h2', { text: 'Keys' }), note, list),
    );
    async function create() {
      const data = new FormData(form);
      const body = {
        principal: String(data.get('principal')).trim(),
        roles: String(data.get('roles'))
          .split(',')
          .map((r) => r.trim())
          .filter(Boolean),
      };
      const expires = isoOfLocal(String(data.get('expiresAt')));
      if (expires) {
        body.expiresAt = expires;
      }
      const answer = await call(`${ADMIN}/api-keys`, { method: 'POST', json: body });
      if (!answer.response.ok) {
        created.replaceChildren(message(problem(answer), 'error'));
        return;
      }
      form.reset();
      const keyField = el('input', {
        id: 'newKey',
        readonly: true,
        value: answer.body.key,
        class: 'secret',
      });
      keyField.addEventListener('focus', () => keyField.select());
      created.replaceChildren(
        el(
          'div',
          { class: 'message ok', role: 'status' },
          el('p', {
            text: `Key ${answer.body.id} for ${answer.body.principal} created. Copy it now: it is shown only this once.${me.apiKeysAccepted ? '' : ' The service refuses it until AUTH_MODE includes apiKey.'}`,
          }),
          el('label', { for: 'newKey', text: 'The key' }),
          keyField,
        ),
      );
      keyField.focus();
      await refresh();
    }
    async function revoke(key) {
      if (
        !window.confirm(
          `Revoke the key ${key.id} of ${key.principal}? Clients using it are refused from now on.`,
        )
      ) {
        return;
      }
      const answer = await call(`${ADMIN}/api-keys/${encodeURIComponent(key.id)}`, {
        method: 'DELETE',
      });
      setMessage(
        note,
        answer.response.ok ? `Key ${key.id} revoked.` : problem(answer),
        answer.response.ok ? '' : 'error',
      );
      await refresh();
    }
    async function refresh() {
      await fill(list, async () => {
        const { apiKeys } = await read(`${ADMIN}/api-keys`);
        const headers = [
          'Key id',
          'Principal',
          'Roles',
          'Created',
          'Created by',
          'Expires',
          'Last used',
          'Actions',
        ];
        return table(
          'API keys made at run time, oldest first',
          headers,
          apiKeys.map((key) =>
            row(
              headers,
              [
                el('code', { text: key.id }),
                key.principal,
                key.roles.join(', '),
                timeElement(key.createdAt),
                key.createdBy || '–',
                timeElement(key.expiresAt),
                timeElement(key.lastUsedAt),
                button('Revoke', () => void revoke(key), {
                  class: 'danger',
                  'aria-label': `Revoke key ${key.id}`,
                }),
              ],
              { 'data-key-id': key.id },
            ),
          ),
          'No API key was made here yet.',
        );
      });
    }
    return { element, refresh };
  }

  // ---- Application settings ------------------------------------------------------------------

  function settingsView(query) {
    if (!me.globalAdmin) {
      return globalOnly('application settings');
    }
    const app = query.get('application') || me.applications[0] || '';
    const picker = el('form', { class: 'filters', 'aria-label': 'Choose the application' });
    picker.append(
      field(
        'settingsApplication',
        'Application',
        select('application', applicationOptions(false), app),
      ),
      el('div', { class: 'form-actions' }, el('button', { type: 'submit', text: 'Open' })),
    );
    picker.addEventListener('submit', (event) => {
      event.preventDefault();
      go(
        ['settings'],
        new URLSearchParams({ application: new FormData(picker).get('application') }),
      );
    });
    const info = el('p', { class: 'help' });
    const editor = el('textarea', {
      id: 'settingsText',
      rows: '16',
      spellcheck: 'false',
      'aria-describedby': 'settingsHelp',
    });
    const jsonPart = el(
      'div',
      {},
      el('label', { for: 'settingsText', text: `Rights and settings of ${app} (JSON)` }),
      el('p', {
        id: 'settingsHelp',
        class: 'help',
        text: 'security, settings and slots, as in the configuration (docs/api.md#application-settings). A part left out is emptied.',
      }),
      editor,
    );
    const formPart = el('div', { id: 'settingsFields' });
    const note = el('div', { id: 'settingsMessage' });
    const save = el('button', { type: 'submit', text: 'Save the settings' });
    /** The form (generated from the settings' schema), or the raw JSON (`editor=json`). */
    let asJson = query.get('editor') === 'json';
    const toggle = el('button', { type: 'button', id: 'settingsEditor' });
    toggle.addEventListener('click', () => switchEditor());
    const form = el(
      'form',
      { class: 'settings-form', 'aria-label': `Rights and settings of ${app}` },
      el('p', {}, toggle),
      formPart,
      jsonPart,
      el('div', { class: 'form-actions' }, save),
      note,
    );
    let etag = null;
    let version = null;
    /** The settings as loaded: what the form was filled from, and what it keeps of unknown fields. */
    let loaded = null;
    /** The form's fields, built from the schema once it is read. */
    let fields = null;
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void store();
    });
    const element = el(
      'div',
      {},
      picker,
      app ? [info, form] : message('You administer no application.'),
    );

    function showEditor() {
      formPart.hidden = asJson;
      jsonPart.hidden = !asJson;
      toggle.textContent = asJson ? 'Edit as a form' : 'Edit as JSON';
    }
    showEditor();

    /** Carries the edit over: the form's values into the JSON, or the JSON's into the form. */
    function switchEditor() {
      if (asJson) {
        let body;
        try {
          body = JSON.parse(editor.value);
        } catch (error) {
          setMessage(note, `The text is not JSON: ${error.message}`, 'error');
          return;
        }
        fields.fill(body);
      } else {
        editor.value = JSON.stringify(fields.collect(), null, 2);
      }
      setMessage(note, '');
      asJson = !asJson;
      showEditor();
    }

    async function load() {
      const answer = await call(`${ADMIN}/applications/${encodeURIComponent(app)}`);
      if (!answer.response.ok) {
        setMessage(note, problem(answer), 'error');
        return;
      }
      etag = answer.response.headers.get('ETag');
      const view = answer.body;
      version = view.version;
      info.textContent = `Version ${view.version} (${view.source === 'stored' ? 'stored' : 'from the configuration'})${view.updatedAt ? `, changed ${formatTime(view.updatedAt)} by ${view.updatedBy || 'unknown'}` : ''}.`;
      loaded = { security: view.security, settings: view.settings, slots: view.slots };
      editor.value = JSON.stringify(loaded, null, 2);
      if (fields === null) {
        try {
          fields = settingsFields(await settingsSchema());
        } catch (error) {
          // Without the schema there is no form; the JSON editor still works.
          setMessage(note, `The settings' form is not available: ${error.message}`, 'error');
          asJson = true;
          showEditor();
          toggle.hidden = true;
          return;
        }
        formPart.replaceChildren(fields.element);
      }
      fields.fill(loaded);
    }

    async function store() {
      let body;
      if (asJson) {
        try {
          body = JSON.parse(editor.value);
        } catch (error) {
          setMessage(note, `The text is not JSON: ${error.message}`, 'error');
          editor.focus();
          return;
        }
      } else {
        body = fields.collect();
      }
      if (body && body.settings && 'callbackSecretSet' in body.settings) {
        // Read-only in the answer: the secret itself is left as it is unless one is given.
        delete body.settings.callbackSecretSet;
      }
      const answer = await call(`${ADMIN}/applications/${encodeURIComponent(app)}`, {
        method: 'PUT',
        json: body,
        headers: { 'If-Match': etag || '"0"' },
      });
      if (answer.response.status === 412) {
        note.replaceChildren(
          el(
            'div',
            { class: 'message error', role: 'alert' },
            el('p', {
              text: `Not saved: someone changed the settings of ${app} after you opened them (you edited version ${version}). Nothing was stored.`,
            }),
            el('p', { text: 'Load the current settings, make your change again and save.' }),
            button(
              'Load the current settings',
              () => void load().then(() => setMessage(note, 'The current settings are loaded.')),
            ),
          ),
        );
        return;
      }
      if (!answer.response.ok) {
        setMessage(note, problem(answer), 'error');
        return;
      }
      await load();
      const restart = answer.body.restartRequired || [];
      setMessage(
        note,
        `Saved as version ${answer.body.version}; in force on every node within a second.${restart.length ? ` ${restart.join(', ')} take effect when the workers start again.` : ''}`,
      );
    }
    return { element, refresh: app ? load : null };
  }

  /** The schema of an application's entry, from the API's OpenAPI description (read once). */
  let entrySchema = null;
  async function settingsSchema() {
    if (entrySchema === null) {
      const document = await read(`${REST}/openapi.json`);
      const schemas = document.components.schemas;
      const resolve = (schema) =>
        schema && schema.$ref ? schemas[schema.$ref.split('/').pop()] : schema;
      const entry = schemas.ApplicationEntry;
      entrySchema = {
        security: resolve(entry.properties.security),
        settings: resolve(entry.properties.settings),
        slots: entry.properties.slots,
      };
    }
    return entrySchema;
  }

  /** A schema's description as plain text (its Markdown code marks dropped). */
  function plainText(description) {
    return (description || '').replace(/`/g, '');
  }

  /** A JSON Schema type without its null: `integer` of `["integer", "null"]`. */
  function typeOf(property) {
    const types = [].concat(property.type || []);
    return types.find((type) => type !== 'null') || 'string';
  }

  /**
   * The form of an application's entry, one field per property of its schema, in the schema's
   * order: a choice of default, yes and no for a flag (a flag left at its default is left out,
   * as in the configuration), a number field with the schema's bounds, a text field, a list as
   * one name per line, a secret that is never shown (empty: kept as it is). An empty field is
   * left out, so its default applies. `fill` puts an entry in, `collect` takes it out (the
   * fields the schema does not know carried over as they were loaded).
   */
  function settingsFields(schema) {
    const controls = [];
    let loaded = {};

    function control(part, name, property) {
      const id = `setting-${part}-${name}`;
      const helpId = `${id}-help`;
      const type = typeOf(property);
      let input;
      let read;
      let write;
      if (type === 'boolean') {
        input = select(
          name,
          [
            ['', 'Default'],
            ['true', 'Yes'],
            ['false', 'No'],
          ],
          '',
        );
        read = () => (input.value === '' ? undefined : input.value === 'true');
        write = (value) => {
          input.value = value === true ? 'true' : value === false ? 'false' : '';
        };
      } else if (type === 'integer' || type === 'number') {
        input = el('input', {
          type: 'number',
          name,
          step: type === 'integer' ? '1' : 'any',
          min: property.minimum,
          max: property.maximum,
          inputmode: type === 'integer' ? 'numeric' : 'decimal',
        });
        read = () => (input.value === '' ? undefined : Number(input.value));
        write = (value) => {
          input.value = typeof value === 'number' ? String(value) : '';
        };
      } else if (type === 'array') {
        input = el('textarea', { name, rows: '3', spellcheck: 'false' });
        read = () => {
          const lines = input.value
            .split('\n')
            .map((line) => line.trim())
            .filter((line) => line !== '');
          return lines.length === 0 ? undefined : lines;
        };
        write = (value) => {
          input.value = Array.isArray(value) ? value.join('\n') : '';
        };
      } else if (property.writeOnly) {
        // A secret: never shown; typed in to replace it, or removed with the box below.
        input = el('input', {
          type: 'password',
          name,
          autocomplete: 'new-password',
          minlength: property.minLength,
        });
        const removeId = `${id}-remove`;
        const remove = el('input', { type: 'checkbox', id: removeId });
        const isSet = el('span', {});
        read = () => (remove.checked ? null : input.value === '' ? undefined : input.value);
        write = (_value, part) => {
          input.value = '';
          remove.checked = false;
          isSet.textContent =
            part && part[`${name}Set`] ? ' (one is set; empty: kept)' : ' (none set)';
        };
        controls.push({ part, name, read, write });
        return el(
          'div',
          { class: 'field' },
          el('label', { for: id }, property.title || name, isSet),
          Object.assign(input, { id }),
          el('p', { id: helpId, class: 'help', text: plainText(property.description) }),
          el(
            'span',
            {},
            remove,
            ' ',
            el('label', {
              for: removeId,
              text: `Remove the ${(property.title || name).toLowerCase()}`,
            }),
          ),
        );
      } else {
        input = el('input', { type: 'text', name, spellcheck: 'false' });
        read = () => (input.value === '' ? undefined : input.value);
        write = (value) => {
          input.value = typeof value === 'string' ? value : '';
        };
      }
      input.setAttribute('aria-describedby', helpId);
      controls.push({ part, name, read, write });
      const wrapped = field(id, property.title || name, input);
      wrapped.append(el('p', { id: helpId, class: 'help', text: plainText(property.description) }));
      return wrapped;
    }

    const partOf = (part, legend) => {
      const properties = Object.entries(schema[part].properties || {}).filter(
        ([, property]) => !property.readOnly,
      );
      return el(
        'fieldset',
        { class: 'settings-part' },
        el('legend', { text: legend }),
        properties.map(([name, property]) => control(part, name, property)),
      );
    };
    const slots = el(
      'fieldset',
      { class: 'settings-part' },
      el('legend', { text: 'Slots' }),
      control('', 'slots', schema.slots),
    );
    const element = el(
      'div',
      {},
      partOf('security', 'Rights'),
      partOf('settings', 'Settings'),
      slots,
    );

    function fill(entry) {
      loaded = entry || {};
      for (const { part, name, write } of controls) {
        const values = part === '' ? loaded : loaded[part] || {};
        write(values[name], values);
      }
    }

    function collect() {
      const known = (part) => new Set(controls.filter((c) => c.part === part).map((c) => c.name));
      const body = {};
      for (const part of ['security', 'settings']) {
        const kept = {};
        const names = known(part);
        for (const [name, value] of Object.entries(loaded[part] || {})) {
          if (!names.has(name) && !(schema[part].properties[name] || {}).readOnly) {
            kept[name] = value;
          }
        }
        body[part] = kept;
      }
      for (const { part, name, read } of controls) {
        const value = read();
        if (value === undefined) {
          continue;
        }
        if (part === '') {
          body[name] = value;
        } else {
          body[part][name] = value;
        }
      }
      return body;
    }

    return { element, fill, collect };
  }

  // ---- Audit trail ---------------------------------------------------------------------------

  const AUDIT_FILTERS = ['from', 'to', 'principal', 'application', 'action'];

  function auditView(query) {
    if (!me.globalAdmin) {
      return globalOnly('the audit trail');
    }
    const form = el('form', { class: 'filters', 'aria-label': 'Filter the audit trail' });
    form.append(
      field(
        'auditFrom',
        'From',
        el('input', { type: 'datetime-local', name: 'from', value: localOfIso(query.get('from')) }),
      ),
      field(
        'auditTo',
        'Before',
        el('input', { type: 'datetime-local', name: 'to', value: localOfIso(query.get('to')) }),
      ),
      field(
        'auditPrincipal',
        'Principal',
        el('input', {
          name: 'principal',
          value: query.get('principal') || '',
          placeholder: 'user:alice',
        }),
      ),
      field(
        'auditApplication',
        'Application',
        select('application', applicationOptions(true), query.get('application') || ''),
      ),
      field(
        'auditAction',
        'Action',
        select(
          'action',
          [['', 'Any'], ...(me.auditActions || []).map((action) => [action, action])],
          query.get('action') || '',
        ),
      ),
      el('div', { class: 'form-actions' }, el('button', { type: 'submit', text: 'Show' })),
    );
    routeOnSubmit(form, 'audit', AUDIT_FILTERS);
    const filters = filtersOf(query, AUDIT_FILTERS);
    const offset = Number(query.get('offset')) || 0;
    const csv = new URLSearchParams(filters);
    csv.set('format', 'csv');
    csv.set('limit', '1000');
    const download = el('a', {
      id: 'auditCsv',
      class: 'button secondary',
      href: `${ADMIN}/audit?${csv}`,
      download: 'audit.csv',
      text: 'Download as CSV',
    });
    const list = el('div', {}, 'Loading…');
    const pager = el('div', { class: 'pager' });
    const element = el('div', {}, form, el('p', {}, download), list, pager);
    async function refresh() {
      const params = new URLSearchParams(filters);
      params.set('limit', '100');
      params.set('offset', String(offset));
      params.set('format', 'json');
      await fill(list, async () => {
        const { auditEvents, more } = await read(`${ADMIN}/audit?${params}`);
        const headers = ['Time', 'Principal', 'Action', 'Application', 'Job', 'Outcome', 'Details'];
        const links = [];
        if (offset > 0) {
          const previous = new URLSearchParams(filters);
          previous.set('offset', String(Math.max(0, offset - 100)));
          links.push(el('a', { href: `#/audit?${previous}`, text: 'Newer rows' }));
        }
        if (more) {
          const next = new URLSearchParams(filters);
          next.set('offset', String(offset + 100));
          links.push(el('a', { href: `#/audit?${next}`, text: 'Older rows' }));
        }
        pager.replaceChildren(...links);
        return table(
          'Audit trail, newest first',
          headers,
          auditEvents.map((event) =>
            row(headers, [
              timeElement(event.time),
              event.principal || '–',
              event.action,
              event.application || '–',
              event.jobId && event.application ? jobLink(event.application, event.jobId) : '–',
              event.outcome,
              event.details ? el('code', { class: 'details', text: event.details }) : '–',
            ]),
          ),
          'No audit row matches.',
        );
      });
    }
    return { element, refresh };
  }

  // ---- R packages ----------------------------------------------------------------------------

  /** The application picker of the per-application views (packages, catalog). */
  function applicationPicker(viewName, app) {
    const picker = el('form', { class: 'filters', 'aria-label': 'Choose the application' });
    picker.append(
      field(
        `${viewName}Application`,
        'Application',
        select('application', applicationOptions(false), app),
      ),
      el('div', { class: 'form-actions' }, el('button', { type: 'submit', text: 'Show' })),
    );
    picker.addEventListener('submit', (event) => {
      event.preventDefault();
      go([viewName], new URLSearchParams({ application: new FormData(picker).get('application') }));
    });
    return picker;
  }

  /** The upload form of a per-application view; `send` runs on submit. */
  function uploadForm(label, send, fields) {
    const form = el(
      'form',
      { class: 'filters', 'aria-label': label },
      fields,
      el('div', { class: 'form-actions' }, el('button', { type: 'submit', text: 'Upload' })),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      send();
    });
    return form;
  }

  /** A per-application view of files (packages, catalog): picker, heading, upload, list. */
  function fileView(viewName, app, title, upload, note, list) {
    return el(
      'div',
      {},
      applicationPicker(viewName, app),
      el('h2', { text: title }),
      upload,
      note,
      list,
    );
  }

  function packagesView(query) {
    const app = query.get('application') || me.applications[0] || '';
    const note = el('div', {});
    const list = el('div', {}, 'Loading…');
    const fileInput = el('input', {
      type: 'file',
      name: 'package',
      accept: '.tar.gz,application/gzip',
      required: true,
    });
    const upload = uploadForm(`Upload an R package to ${app}`, () => void send(), [
      field('packageFile', 'Source package (name_version.tar.gz)', fileInput),
    ]);
    const element = fileView('packages', app, `Packages of ${app}`, upload, note, list);
    async function send() {
      const file = fileInput.files[0];
      const match = file && /^([A-Za-z][A-Za-z0-9.]*[A-Za-z0-9])_[^_]+\.tar\.gz$/.exec(file.name);
      if (!match) {
        setMessage(
          note,
          'Choose a source package named <name>_<version>.tar.gz, as R CMD build makes it.',
          'error',
        );
        return;
      }
      const answer = await call(`${ADMIN}/packages/${encodeURIComponent(match[1])}`, {
        method: 'PUT',
        body: file,
        headers: { ...forApplication(app), 'Content-Type': 'application/gzip' },
      });
      setMessage(
        note,
        answer.response.ok
          ? `Package ${match[1]} stored; the nodes install it in a few seconds.`
          : problem(answer),
        answer.response.ok ? '' : 'error',
      );
      upload.reset();
      await refresh();
    }
    async function remove(name) {
      if (!window.confirm(`Remove the package ${name} from ${app} on every node?`)) {
        return;
      }
      const answer = await call(`${ADMIN}/packages/${encodeURIComponent(name)}`, {
        method: 'DELETE',
        headers: forApplication(app),
      });
      setMessage(
        note,
        answer.response.ok ? `Package ${name} removed.` : problem(answer),
        answer.response.ok ? '' : 'error',
      );
      await refresh();
    }
    async function refresh() {
      await fill(list, async () => {
        const { packages } = await read(`${ADMIN}/packages`, forApplication(app));
        const headers = ['Package', 'Version', 'Installed by', 'Uploaded', 'Nodes', 'Actions'];
        return table(
          `R packages of ${app}`,
          headers,
          packages.map((p) =>
            row(headers, [
              p.name,
              p.version,
              p.installedBy,
              timeElement(p.installedTime),
              el(
                'ul',
                { class: 'runs' },
                (p.nodes || []).map((n) =>
                  el('li', {}, el('code', { text: n.name }), `: ${n.state}`),
                ),
              ),
              button('Delete', () => void remove(p.name), {
                class: 'danger',
                'aria-label': `Delete package ${p.name}`,
              }),
            ]),
          ),
          `${app} has no packages of its own.`,
        );
      });
    }
    return { element, refresh: app ? refresh : null };
  }

  // ---- Catalog -------------------------------------------------------------------------------

  const CATALOG_SECTIONS = [
    'R_SCRIPTS',
    'SWEAVE_FILES',
    'JOB_CONFIGURATIONS',
    'R_FUNCTIONS',
    'EMAIL_REPLIES',
  ];

  function catalogView(query) {
    const app = query.get('application') || me.applications[0] || '';
    const note = el('div', {});
    const list = el('div', {}, 'Loading…');
    const fileInput = el('input', { type: 'file', name: 'file', required: true });
    const upload = uploadForm(`Upload a catalog file to ${app}`, () => void send(), [
      field(
        'catalogSection',
        'Section',
        select(
          'section',
          CATALOG_SECTIONS.map((s) => [s, s]),
          'R_SCRIPTS',
        ),
      ),
      field('catalogFile', 'File', fileInput),
    ]);
    const element = fileView('catalog', app, `Catalog of ${app}`, upload, note, list);
    const fileUrl = (section, name) =>
      `${ADMIN}/catalog/${encodeURIComponent(section)}/${encodeURIComponent(name)}`;
    async function send() {
      const file = fileInput.files[0];
      const section = new FormData(upload).get('section');
      if (!file) {
        setMessage(note, 'Choose a file.', 'error');
        return;
      }
      const answer = await call(fileUrl(section, file.name), {
        method: 'PUT',
        body: file,
        headers: { ...forApplication(app), 'Content-Type': 'application/octet-stream' },
      });
      setMessage(
        note,
        answer.response.ok ? `${section}/${file.name} stored.` : problem(answer),
        answer.response.ok ? '' : 'error',
      );
      upload.reset();
      await refresh();
    }
    async function remove(section, name) {
      if (!window.confirm(`Delete ${section}/${name} from the catalog of ${app}?`)) {
        return;
      }
      const answer = await call(fileUrl(section, name), {
        method: 'DELETE',
        headers: forApplication(app),
      });
      setMessage(
        note,
        answer.response.ok ? `${section}/${name} deleted.` : problem(answer),
        answer.response.ok ? '' : 'error',
      );
      await refresh();
    }
    async function refresh() {
      await fill(list, async () => {
        const { directories } = await read(`${ADMIN}/catalog`, forApplication(app));
        const headers = ['Section', 'File', 'Actions'];
        const rows = directories.flatMap((d) =>
          d.files.map((f) =>
            row(headers, [
              d.type,
              el('code', { text: f.name }),
              button('Delete', () => void remove(d.type, f.name), {
                class: 'danger',
                'aria-label': `Delete ${d.type}/${f.name}`,
              }),
            ]),
          ),
        );
        return table(`Catalog files of ${app}`, headers, rows, `${app} has no catalog files.`);
      });
    }
    return { element, refresh: app ? refresh : null };
  }

  start();
})();
