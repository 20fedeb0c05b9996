// The upload page's behaviour. Without this script the form still posts and the service answers
// the job token as XML; with it the page submits with fetch, follows the job and lists results.
'use strict';

(function () {
  const REST = '/svc/api/rest';
  const VND_JSON = 'application/vnd.svc+json';
  const POLL_FIRST_MS = 300;
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

  // ---- answers ----------------------------------------------------------------------------

  async function readJson(response) {
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch {
      return null;
    }
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
      let response;
      try {
        response = await fetch(form.action, {
          method: 'POST',
          body: new FormData(form),
          headers: { Accept: 'application/json' },
        });
      } catch (error) {
        showMessage(
          formMessage,
          `The service could not be reached (${error.message}). Check your connection and try again.`,
          true,
        );
        return;
      }
      const body = await readJson(response);
      if (!response.ok || !body || !body.jobToken) {
        showMessage(formMessage, errorText(response, body), true);
        return;
      }
      showMessage(formMessage, '', false);
      void followJob(body.jobToken);
    } finally {
      submitButton.disabled = false;
      submitButton.textContent = 'Submit job';
    }
  }

  // ---- the job -----------------------------------------------------------------------------

  const STATE_TEXT = {
    QUEUED: 'Queued: waiting for a free R worker.',
    RUNNING: 'Running in R…',
    DONE: 'Done.',
  };

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
  }

  async function followJob(token) {
    currentJob += 1;
    const mine = currentJob;
    jobPanel.hidden = false;
    $('jobId').textContent = token.jobId;
    $('jobApplication').textContent = token.applicationName;
    const submitted = $('jobSubmitted');
    submitted.dateTime = token.submissionTime;
    submitted.textContent = formatTime(token.submissionTime);
    $('jobOutcome').hidden = true;
    showState('QUEUED');
    jobPanel.scrollIntoView({ block: 'nearest' });

    const statusUri = `${REST}/jobs/${encodeURIComponent(token.applicationName)}/${encodeURIComponent(token.jobId)}`;
    let wait = POLL_FIRST_MS;
    for (;;) {
      if (mine !== currentJob) {
        return;
      }
      let response;
      try {
        response = await fetch(statusUri, { headers: { Accept: VND_JSON } });
      } catch (error) {
        $('jobState').textContent = `Lost contact with the service (${error.message}); retrying…`;
        await sleep(POLL_MAX_MS);
        continue;
      }
      const body = await readJson(response);
      if (!response.ok || !body || !body.jobStatus) {
        $('jobState').textContent = `The job's state cannot be read: ${errorText(response, body)}`;
        return;
      }
      showState(body.jobStatus.state);
      if (body.jobStatus.state === 'DONE') {
        break;
      }
      await sleep(wait);
      wait = Math.min(wait * 2, POLL_MAX_MS);
    }
    await showOutcome(token, mine);
  }

  async function showOutcome(token, mine) {
    const response = await fetch(token.resultUri, { headers: { Accept: VND_JSON } });
    const body = await readJson(response);
    if (mine !== currentJob) {
      return;
    }
    const outcome = $('jobOutcome');
    const text = $('jobOutcomeText');
    const failure = $('jobFailure');
    outcome.hidden = false;
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
    } else {
      outcome.className = 'outcome failed';
      text.textContent = 'The job failed. What R said:';
      const data = await fetch(result.dataUri);
      failure.textContent = data.ok ? await data.text() : errorText(data, null);
      failure.hidden = false;
    }
    resultsApplication.value = token.applicationName;
    await loadResults(token.applicationName);
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
