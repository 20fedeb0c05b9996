// The upload page's behaviour. Without this script the form still posts and the service answers
// the job token as XML; with it the page submits with fetch, follows the job and lists results.
'use strict';

(function () {
  const REST = '/svc/api/rest';
  const VND_JSON = 'application/vnd.svc+json';
  const POLL_MAX_MS = 2000;

  const $ = (id) => document.getElementById(id);
  const form = $('jobUploadForm');
  const submitButton = $('jobSubmitButton');
  const formMessage = $('formMessage');
  const metaRows = $('metaRows');
  const addMetaButton = $('addMetaButton');
  const jobPanel = $('jobPanel');
  const resultsPanel = $('resultsPanel');
  const resultsForm = $('resultsForm');
  const resultsApplication = $('resultsApplication');
  const resultsMessage = $('resultsMessage');
  const resultsTable = $('resultsTable');
  const resultsBody = $('resultsBody');

  /** Each submission gets a number; an older job's polling stops when a newer one starts. */
  let currentJob = 0;
  let metaRowCount = 0;

  addMetaButton.hidden = false;
  resultsPanel.hidden = false;
  showAccount();

  // ---- signing in -------------------------------------------------------------------------

  /** Shows who is signed in (the session cookie is HttpOnly: the service says), or a sign-in link. */
  async function showAccount() {
    let session;
    try {
      const response = await fetch('/svc/session', { headers: { Accept: 'application/json' } });
      session = response.ok ? await response.json() : null;
    } catch {
      session = null;
    }
    if (!session || !session.signInAvailable) {
      return;
    }
    $('account').hidden = false;
    if (session.principal) {
      $('accountName').textContent = `Signed in as ${session.principal}`;
      $('signOutForm').hidden = false;
    } else {
      $('accountName').textContent = 'Not signed in';
      $('signInLink').hidden = false;
    }
  }

  // ---- answers ----------------------------------------------------------------------------

  async function readJson(response) {
    return parseJson(await response.text());
  }

  const STATUS_HINTS = {
    400: 'The service could not accept the form.',
    401: 'You need to sign in to use this application.',
    403: 'You may not use this application.',
    404: 'Not found.',
    413: 'The upload is too large.',
    415: 'The service does not accept this kind of upload.',
    429: 'Too many requests; wait a moment and try again.',
    503: 'The service is busy or its database is unavailable; try again shortly.',
  };

  /** A sentence a person can act on, from an error answer (the service's `error` body). */
  function errorText(response, body) {
    const hint = STATUS_HINTS[response.status] || `The service answered ${response.status}.`;
    const detail = body && body.error && body.error.message;
    return detail ? `${hint} ${capitalise(String(detail))}` : hint;
  }

  function capitalise(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  /** Jettison lists: "" for none, an object for one, an array for several. */
  function listOf(value) {
    if (!value) {
      return [];
    }
    return Array.isArray(value) ? value : [value];
  }

  function showMessage(element, text, isError) {
    element.textContent = text;
    element.classList.toggle('error', Boolean(isError));
    element.hidden = !text;
  }

  function formatTime(iso) {
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
  }

  function timeElement(iso) {
    const time = document.createElement('time');
    time.dateTime = iso;
    time.textContent = formatTime(iso);
    return time;
  }

  function parseJson(text) {
    try {
      return JSON.parse(text);
    } catch {
      return null;
    }
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // ---- meta rows ---------------------------------------------------------------------------

  /** A row of two inputs; the value input carries the field name X-SVC-Meta-<name>. */
  function addMetaRow() {
    metaRowCount += 1;
    const n = metaRowCount;
    const row = document.createElement('li');
    row.className = 'meta-row';

    const nameField = labelledInput(`metaName${n}`, 'Name');
    const valueField = labelledInput(`metaValue${n}`, 'Value');
    const nameInput = nameField.querySelector('input');
    const valueInput = valueField.querySelector('input');
    nameInput.classList.add('meta-name');
    valueInput.classList.add('meta-value');
    nameInput.addEventListener('input', () => {
      const name = nameInput.value.trim();
      if (name) {
        valueInput.name = `X-SVC-Meta-${name}`;
      } else {
        valueInput.removeAttribute('name');
      }
    });

    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'secondary';
    remove.textContent = 'Remove';
    remove.setAttribute('aria-label', `Remove meta parameter ${n}`);
    remove.addEventListener('click', () => {
      row.remove();
      addMetaButton.focus();
    });

    row.append(nameField, valueField, remove);
    metaRows.append(row);
    nameInput.focus();
  }

  function labelledInput(id, text) {
    const field = document.createElement('div');
    field.className = 'field';
    const label = document.createElement('label');
    label.htmlFor = id;
    label.textContent = text;
    const input = document.createElement('input');
    input.type = 'text';
    input.id = id;
    input.autocomplete = 'off';
    input.spellcheck = false;
    field.append(label, input);
    return field;
  }

  /** A row with a value but no name would be dropped silently: say so instead. */
  function unnamedMetaRow() {
    for (const row of metaRows.querySelectorAll('.meta-row')) {
      const name = row.querySelector('.meta-name');
      const value = row.querySelector('.meta-value');
      if (!name.value.trim() && value.value.trim()) {
        return name;
      }
    }
    return null;
  }

  addMetaButton.addEventListener('click', addMetaRow);

  // ---- submission --------------------------------------------------------------------------

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void submitJob();
  });

  async function submitJob() {
    showMessage(formMessage, '', false);
    const unnamed = unnamedMetaRow();
    if (unnamed) {
      showMessage(
        formMessage,
        'A meta parameter has a value but no name: give it a name or remove the row.',
        true,
      );
      unnamed.focus();
      return;
    }
    submitButton.disabled = true;
    submitButton.textContent = 'Sending…';
    try {
      let answer;
      try {
        answer = await sendForm(form);
      } catch (error) {
        showMessage(
          formMessage,
          `The service could not be reached (${error.message}). Check your connection and try again.`,
          true,
        );
        return;
      }
      const body = parseJson(answer.text);
      if (answer.status !== 202 || !body || !body.jobToken) {
        showMessage(formMessage, errorText(answer, body), true);
        return;
      }
      showMessage(formMessage, '', false);
      void followJob(body.jobToken);
    } finally {
      submitButton.disabled = false;
      submitButton.textContent = 'Submit job';
    }
  }

  /**
   * Posts the form with XMLHttpRequest: fetch cannot report how much of a large upload was sent.
   * Resolves with the status and the answer's text; rejects when the service cannot be reached.
   */
  function sendForm(formElement) {
    const status = $('uploadStatus');
    const bar = $('uploadProgress');
    const label = $('uploadProgressText');
    bar.value = 0;
    bar.max = 1;
    label.textContent = '';
    status.hidden = false;
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', formElement.action);
      xhr.setRequestHeader('Accept', VND_JSON);
      xhr.upload.addEventListener('progress', (event) => {
        if (event.lengthComputable && event.total > 0) {
          bar.max = event.total;
          bar.value = event.loaded;
          label.textContent = `Sent ${megabytes(event.loaded)} of ${megabytes(event.total)} (${Math.floor((100 * event.loaded) / event.total)} %)`;
        }
      });
      xhr.addEventListener('load', () => resolve({ status: xhr.status, text: xhr.responseText }));
      xhr.addEventListener('error', () => {
        status.hidden = true;
        reject(new Error('the connection failed'));
      });
      xhr.addEventListener('abort', () => {
        status.hidden = true;
        reject(new Error('the upload was stopped'));
      });
      xhr.send(new FormData(formElement));
    });
  }

  const megabytes = window.svcResultPreview.megabytes;

  // ---- the job -----------------------------------------------------------------------------

  const STATE_TEXT = {
    QUEUED: 'Queued: waiting for a free R worker.',
    RUNNING: 'Running in R…',
    DONE: 'Done.',
  };
  /** How long one status request may wait for a change of state (the service allows up to 60). */
  const STATUS_WAIT_S = 25;
  /** The log shown keeps this many lines; the whole log stays with the result. */
  const LOG_MAX_LINES = 2000;

  function showState(state) {
    $('jobState').textContent = STATE_TEXT[state] || state;
    jobPanel.dataset.state = state;
    const order = ['QUEUED', 'RUNNING', 'DONE'];
    const reached = order.indexOf(state);
    for (const step of $('jobSteps').children) {
      const index = order.indexOf(step.dataset.state);
      step.classList.toggle('reached', index <= reached);
      step.classList.toggle('current', index === reached);
      if (index === reached) {
        step.setAttribute('aria-current', 'step');
      } else {
        step.removeAttribute('aria-current');
      }
    }
    $('jobCancelButton').hidden = state === 'DONE';
  }

  /** A log line or a progress report comes from R: the job runs, whatever the last status said. */
  function showRunningIfQueued() {
    if (jobPanel.dataset.state === 'QUEUED') {
      showState('RUNNING');
    }
  }

  function showProgress(progress) {
    if (!progress || typeof progress.fraction !== 'number') {
      return;
    }
    $('jobProgressBox').hidden = false;
    $('jobProgress').value = progress.fraction;
    const percent = `${Math.round(progress.fraction * 100)} %`;
    $('jobProgressText').textContent = progress.message
      ? `${percent}: ${progress.message}`
      : percent;
  }

  /** The job's live log: one line per `line` event, the bar per `progress` event. */
  let logStream = null;

  function followLog(statusUri, mine) {
    if (logStream) {
      logStream.close();
    }
    const log = $('jobLog');
    const count = $('jobLogCount');
    let lines = 0;
    log.textContent = '';
    count.textContent = '';
    $('jobLogBox').hidden = true;
    const stream = new EventSource(`${statusUri}/log`);
    logStream = stream;
    stream.addEventListener('line', (event) => {
      const data = parseJson(event.data);
      if (mine !== currentJob || !data) {
        return;
      }
      showRunningIfQueued();
      lines += 1;
      log.append(`${data.stream === 'stderr' ? '! ' : ''}${data.line}\n`);
      while (log.childNodes.length > LOG_MAX_LINES) {
        log.firstChild.remove();
      }
      count.textContent = `(${lines} line${lines === 1 ? '' : 's'})`;
      $('jobLogBox').hidden = false;
      log.scrollTop = log.scrollHeight;
    });
    stream.addEventListener('progress', (event) => {
      if (mine === currentJob) {
        showRunningIfQueued();
        showProgress(parseJson(event.data));
      }
    });
    // The stream ends once the job is done and every line was sent; no reconnect after that.
    stream.addEventListener('end', () => stream.close());
  }

  async function cancelJob(statusUri) {
    const message = $('jobCancelMessage');
    const button = $('jobCancelButton');
    button.disabled = true;
    try {
      const response = await fetch(statusUri, {
        method: 'DELETE',
        headers: { Accept: VND_JSON },
      });
      if (response.status === 202 || response.status === 204) {
        showMessage(message, 'Cancelling the job…', false);
      } else if (response.status === 409) {
        showMessage(message, 'The job had already finished.', false);
      } else {
        showMessage(message, errorText(response, await readJson(response)), true);
      }
    } catch (error) {
      showMessage(message, `The service could not be reached (${error.message}).`, true);
    } finally {
      button.disabled = false;
    }
  }

  let cancelCurrentJob = null;
  $('jobCancelButton').addEventListener('click', () => cancelCurrentJob && void cancelCurrentJob());

  async function followJob(token) {
    currentJob += 1;
    const mine = currentJob;
    jobPanel.hidden = false;
    $('jobId').textContent = token.jobId;
    $('jobApplication').textContent = token.applicationName;
    const submitted = $('jobSubmitted');
    submitted.dateTime = token.submissionTime;
    submitted.textContent = formatTime(token.submissionTime);
    // The job's address in the operator console, the same everywhere (docs/console.md).
    $('jobConsoleLink').href =
      `/svc/console/#/jobs/${encodeURIComponent(token.applicationName)}/${encodeURIComponent(token.jobId)}`;
    $('jobOutcome').hidden = true;
    $('jobProgressBox').hidden = true;
    $('jobProgress').value = 0;
    $('jobProgressText').textContent = '';
    showMessage($('jobCancelMessage'), '', false);
    showState('QUEUED');
    jobPanel.scrollIntoView({ block: 'nearest' });

    const statusUri = `${REST}/jobs/${encodeURIComponent(token.applicationName)}/${encodeURIComponent(token.jobId)}`;
    cancelCurrentJob = () => cancelJob(statusUri);
    followLog(statusUri, mine);
    let status;
    // The first look answers at once; then each request waits for the next change of state.
    let query = '';
    for (;;) {
      if (mine !== currentJob) {
        return;
      }
      let response;
      try {
        response = await fetch(`${statusUri}${query}`, { headers: { Accept: VND_JSON } });
      } catch (error) {
        $('jobState').textContent = `Lost contact with the service (${error.message}); retrying…`;
        await sleep(POLL_MAX_MS);
        continue;
      }
      const body = await readJson(response);
      if (mine !== currentJob) {
        return;
      }
      if (!response.ok || !body || !body.jobStatus) {
        $('jobState').textContent = `The job's state cannot be read: ${errorText(response, body)}`;
        return;
      }
      status = body.jobStatus;
      showState(status.state);
      showProgress(status.progress);
      if (status.state === 'DONE') {
        break;
      }
      // `while` names the state shown, so a change between two requests is answered at once.
      query = `?wait=${STATUS_WAIT_S}&while=${status.state}`;
    }
    cancelCurrentJob = null;
    showMessage($('jobCancelMessage'), '', false);
    await showOutcome(token, mine, status);
  }

  async function showOutcome(token, mine, status) {
    const response = await fetch(token.resultUri, { headers: { Accept: VND_JSON } });
    const body = await readJson(response);
    if (mine !== currentJob) {
      return;
    }
    const outcome = $('jobOutcome');
    const text = $('jobOutcomeText');
    const failure = $('jobFailure');
    const preview = $('jobPreview');
    outcome.hidden = false;
    preview.hidden = true;
    if (!response.ok || !body || !body.result) {
      outcome.className = 'outcome failed';
      text.textContent = `The result cannot be read: ${errorText(response, body)}`;
      $('jobDownload').parentElement.hidden = true;
      failure.hidden = true;
      return;
    }
    const result = body.result;
    const download = $('jobDownload');
    download.href = result.dataUri;
    download.textContent = `Download the result (${result.type.toUpperCase()})`;
    download.parentElement.hidden = false;
    if (result.success) {
      outcome.className = 'outcome succeeded';
      text.textContent = 'The job succeeded.';
      failure.hidden = true;
      if (result.type === 'zip') {
        await showPreview(result, mine);
      }
    } else {
      outcome.className = 'outcome failed';
      text.textContent =
        status && status.cancellation ? 'The job was cancelled.' : 'The job failed. What R said:';
      const data = await fetch(result.dataUri);
      failure.textContent = data.ok ? await data.text() : errorText(data, null);
      failure.hidden = false;
    }
    resultsApplication.value = token.applicationName;
    await loadResults(token.applicationName);
  }

  // ---- the result's files, shown in the page (result-preview.js) --------------------------

  async function showPreview(result, mine) {
    $('jobPreview').hidden = false;
    await window.svcResultPreview.show(result, {
      list: $('previewFiles'),
      message: $('previewMessage'),
      isCurrent: () => mine === currentJob,
      describeError: (response) => errorText(response, null),
    });
  }

  // ---- results of an application -----------------------------------------------------------

  resultsForm.addEventListener('submit', (event) => {
    event.preventDefault();
    void loadResults(resultsApplication.value.trim());
  });

  async function loadResults(application) {
    if (!application) {
      showMessage(resultsMessage, 'Enter an application name to see its results.', true);
      resultsApplication.focus();
      return;
    }
    showMessage(resultsMessage, 'Loading…', false);
    let response;
    try {
      response = await fetch(`${REST}/results/${encodeURIComponent(application)}`, {
        headers: { Accept: VND_JSON },
      });
    } catch (error) {
      showMessage(resultsMessage, `The service could not be reached (${error.message}).`, true);
      return;
    }
    const body = await readJson(response);
    if (!response.ok || !body || !('results' in body)) {
      resultsTable.hidden = true;
      showMessage(resultsMessage, errorText(response, body), true);
      return;
    }
    const results = listOf(body.results && body.results.result);
    resultsBody.replaceChildren(...results.map((result) => resultRow(result, application)));
    resultsTable.hidden = results.length === 0;
    $('resultsCaption').textContent = `Results of ${application}, newest first`;
    showMessage(
      resultsMessage,
      results.length === 0
        ? `${application} has no results.`
        : `${application} has ${results.length} result${results.length === 1 ? '' : 's'}.`,
      false,
    );
  }

  function cell(label, content) {
    const td = document.createElement('td');
    td.dataset.label = label;
    if (typeof content === 'string') {
      td.textContent = content;
    } else {
      td.append(content);
    }
    return td;
  }

  function resultRow(result, application) {
    const row = document.createElement('tr');
    row.dataset.jobId = result.jobId;
    const badge = document.createElement('span');
    badge.className = `badge ${result.success ? 'ok' : 'bad'}`;
    badge.textContent = result.success ? 'Succeeded' : 'Failed';
    const id = document.createElement('code');
    id.textContent = result.jobId;

    const actions = cell('Actions', '');
    actions.className = 'actions-cell';
    const download = document.createElement('a');
    download.className = 'button';
    download.href = result.dataUri;
    download.download = '';
    download.textContent = 'Download';
    download.setAttribute('aria-label', `Download the result of job ${result.jobId}`);
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'danger';
    remove.textContent = 'Delete';
    remove.setAttribute('aria-label', `Delete the result of job ${result.jobId}`);
    remove.addEventListener('click', () => void deleteResult(result, row, application));
    actions.append(download, remove);

    row.append(
      cell('Finished', timeElement(result.resultTime)),
      cell('Outcome', badge),
      cell('Type', result.type),
      cell('Job id', id),
      actions,
    );
    return row;
  }

  async function deleteResult(result, row, application) {
    if (!window.confirm(`Delete the result of job ${result.jobId}? This cannot be undone.`)) {
      return;
    }
    let response;
    try {
      response = await fetch(result.selfUri, { method: 'DELETE', headers: { Accept: VND_JSON } });
    } catch (error) {
      showMessage(resultsMessage, `The service could not be reached (${error.message}).`, true);
      return;
    }
    if (response.status !== 204) {
      showMessage(resultsMessage, errorText(response, await readJson(response)), true);
      return;
    }
    row.remove();
    const left = resultsBody.children.length;
    resultsTable.hidden = left === 0;
    showMessage(
      resultsMessage,
      `Deleted the result of job ${result.jobId}. ${application} has ${left === 0 ? 'no' : left} result${left === 1 ? '' : 's'} left.`,
      false,
    );
    $('resultsHeading').focus();
  }
})();
