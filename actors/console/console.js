/*
 * taskmill web console (SPEC §8 "Console"), served by the node at /ui/.
 * Plain ES2020, no libraries: the files are embedded into the node binary.
 *
 * Stable data-test names, for UI tests:
 *   shell     nav-overview nav-tasks nav-batches nav-jobs nav-keys nav-nodes nav-alerts
 *             live (polling indicator)  page-title (each page's <h2>)
 *             error (banner, role=alert, data-code=<API code>)  error-dismiss
 *             change-token  token-form token-input token-save token-forget token-close
 *             dialog (the confirm <dialog>)  confirm  dismiss
 *             outcome (answer of the last action, role=status; a <details> inside holds the JSON)
 *   overview  total (per status, data-status)  counts (table)  count (cell, data-type data-status;
 *             the totals row has data-type="*")  chart (svg)  throughput-summary
 *             node-running (row, data-node)  limit-row (data-scope)  alert-row (data-id)
 *   tasks     filters (form)  filter-type filter-key filter-status filter-batch filter-limit
 *             filter-apply filter-clear  task-row (data-id)  status (inside each row)
 *             next-page first-page
 *   task      status  waiting (data-reason)  field (<dd>, data-field=<API field name>)
 *             task-error payload result  attempt-row (data-attempt)
 *             retry cancel  reschedule-at (datetime-local)  reschedule-zone (local|utc)
 *             reschedule-preview  reschedule
 *   batches   batch-form batch-input batch-show  batch-count (data-status)  batch-total
 *             rerun-failed (data-batch)  batch-tasks (link)
 *   jobs      job-row (data-name)  job-state (active|paused)  schedule-words
 *   job       job-state  schedule-words  field (data-field)  job-payload  pause resume
 *             trigger-payload  trigger-error  trigger  next-fire (<li>)
 *             firing-row (data-batch)  rerun-failed (data-batch, one per firing)
 *   nodes     node-row (data-name)  role  heartbeat-age  node-link  link-row  executor-row
 *   keys      space-row (data-name)  space-running
 *   key space field (data-field)  top-running-row top-due-row (data-key)  key-running key-due
 *             due-capped
 *   key       field (data-field)  key-task-row (data-id)
 *   alerts    alert-row (data-id)
 *
 * Every mutating button (retry, cancel, reschedule, rerun-failed, pause,
 * resume, trigger) opens the dialog first; click data-test=confirm to go on
 * (or dismiss / Escape to back out). Pages live at #/overview, #/tasks?type=&key=
 * &status=&batch=&limit=&page_token=, #/tasks/<id>, #/batches/<batch>,
 * #/jobs/<name>, #/workflows, #/workflows/<id>, #/keys, #/keys/<space>,
 * #/keys/<space>?key=<key>, #/nodes, #/alerts. window.taskmillConsole.refreshNow() polls
 * at once; describeSchedule(expr) is the cron describer.
 */
'use strict';

(() => {
  const POLL_MS = 2000;
  const LOG_LINES_SHOWN = 1000;
  const STATUSES = ['pending', 'running', 'succeeded', 'failed', 'dead', 'cancelled', 'stopped'];
  const TOKEN_KEY = 'taskmill.api_token';

  // -- DOM building: only createElement and text nodes, so data is never parsed as HTML.

  function addChildren(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c == null || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
  }

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    addChildren(el, children);
    return el;
  }

  function svg(tag, attrs, ...children) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    setAttrs(el, attrs);
    addChildren(el, children);
    return el;
  }

  const $ = (sel, root = document) => root.querySelector(sel);

  // -- values as the API writes them: 64-bit integers may come as strings, times
  //    as RFC 3339 with up to microseconds (Date wants at most milliseconds).

  function num(v) {
    if (v == null || v === '') return null;
    const n = typeof v === 'number' ? v : Number(v);
    return Number.isFinite(n) ? n : null;
  }

  function parseTime(s) {
    if (!s) return null;
    const d = new Date(String(s).replace(/(\.\d{3})\d+/, '$1'));
    return Number.isNaN(d.getTime()) ? null : d;
  }

  const pad = (n, w = 2) => String(n).padStart(w, '0');

  function fmtTime(s) {
    const d = parseTime(s);
    if (!d) return s ? String(s) : '—';
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function span(seconds) {
    const a = Math.abs(seconds);
    if (a < 60) return `${a} s`;
    if (a < 3600) return `${Math.floor(a / 60)} min`;
    if (a < 86400) return `${Math.floor(a / 3600)} h ${Math.floor((a % 3600) / 60)} min`;
    return `${Math.floor(a / 86400)} d`;
  }

  function relative(s) {
    const d = parseTime(s);
    if (!d) return '';
    const secs = Math.round((Date.now() - d.getTime()) / 1000);
    if (secs === 0) return 'now';
    return secs > 0 ? `${span(secs)} ago` : `in ${span(-secs)}`;
  }

  // Local time to read, the exact RFC 3339 value on hover and in datetime.
  function timeEl(s, withRelative) {
    if (!s) return h('span', { class: 'muted' }, '—');
    return h('time', { datetime: s, title: s }, fmtTime(s),
      withRelative ? h('span', { class: 'muted' }, ` (${relative(s)})`) : null);
  }

  function prettyJson(v) {
    if (v === undefined || v === null) return null;
    return JSON.stringify(v, null, 2);
  }

  function jsonBlock(v, test) {
    const text = prettyJson(v);
    return text == null ? h('p', { class: 'muted', 'data-test': test }, 'none')
      : h('pre', { class: 'json', 'data-test': test, tabindex: '0' }, text);
  }

  const taskHref = (id) => `#/tasks/${encodeURIComponent(String(id))}`;
  const batchHref = (b) => `#/batches/${encodeURIComponent(b)}`;
  const jobHref = (name) => `#/jobs/${encodeURIComponent(name)}`;
  const jobLinks = (names) => (names && names.length
    ? names.flatMap((n, i) => [i ? ', ' : '', h('a', { href: jobHref(n), 'data-test': 'child-job' }, n)])
    : 'none');
  const jobPath = (name) => `/v1/jobs/${encodeURIComponent(name)}`;
  const workflowHref = (id) => `#/workflows/${encodeURIComponent(String(id))}`;
  // A path segment "." or ".." would be taken as a step up or in place.
  const segment = (s) => (s === '.' || s === '..' ? s.replace(/\./g, '%2E') : encodeURIComponent(s));
  const keySpaceHref = (space) => `#/keys/${segment(space)}`;
  // A key goes in the query: the key "" (tasks given none) is a key too.
  const keyHref = (space, key) => `${keySpaceHref(space)}?${new URLSearchParams({ key })}`;
  const keyName = (key) => (key === '' ? h('span', { class: 'muted' }, '"" (given none)') : key);

  function statusBadge(status, attrs) {
    return h('span', { class: `badge st-${status}`, 'data-test': 'status', ...attrs }, status);
  }

  function hashFor(path, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v != null && v !== '') q.set(k, v);
    const s = q.toString();
    return `#/${path}${s ? `?${s}` : ''}`;
  }

  function tableOf(label, headers, rows, attrs) {
    // Numeric columns (td.n in the first row) get their header aligned with them.
    const first = rows[0] ? [...rows[0].children] : [];
    return h('div', { class: 'table-wrap', role: 'region', 'aria-label': label, tabindex: '0' },
      h('table', attrs,
        h('thead', null, h('tr', null, headers.map((x, i) => h('th', { scope: 'col', class: first[i] && first[i].classList.contains('n') ? 'n' : null }, x)))),
        h('tbody', null, rows)));
  }

  function fieldList(pairs) {
    return h('dl', { class: 'fields' }, pairs.map(([name, label, value]) => [
      h('dt', null, label),
      h('dd', { 'data-test': 'field', 'data-field': name }, value == null || value === '' ? h('span', { class: 'muted' }, '—') : value),
    ]));
  }

  // -- the API

  class ApiError extends Error {
    constructor(status, code, message, waiting) {
      super(message);
      this.status = status;
      this.code = code;
      this.waiting = waiting || null;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method, headers, cache: 'no-store' };
    // The node takes no change without it, body or not: no form can send it.
    if (method !== 'GET') headers['Content-Type'] = 'application/json';
    if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'network', `the node cannot be reached (${e.message})`);
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        if (res.ok) throw new ApiError(res.status, 'bad_answer', `${method} ${path} answered something that is not JSON`);
      }
    }
    if (!res.ok) {
      const e = (data && data.error) || {};
      const err = new ApiError(res.status, e.code || `http_${res.status}`,
        e.message || res.statusText || `${method} ${path} failed`, e.waiting);
      if (res.status === 401) askToken();
      throw err;
    }
    return data;
  }

  // -- error banner. Poll errors clear when a poll succeeds again; errors of an
  //    action stay until dismissed, the next action or another page, so that
  //    a refresh 2 s later cannot hide them.

  const banner = $('[data-test="error"]');
  const bannerText = $('.banner-text', banner);
  let bannerSource = null;

  function showError(err, source) {
    const e = err instanceof ApiError ? err : new ApiError(0, 'console', String((err && err.message) || err));
    const text = `${e.code}: ${e.message}${e.status ? ` (HTTP ${e.status})` : ''}`;
    if (bannerText.textContent !== text || banner.hidden) bannerText.textContent = text;
    banner.dataset.code = e.code;
    banner.hidden = false;
    bannerSource = source;
    if (!(err instanceof ApiError)) console.error(err);
  }

  function clearError(source) {
    if (source && bannerSource !== source) return;
    banner.hidden = true;
    bannerSource = null;
  }

  $('[data-test="error-dismiss"]').addEventListener('click', () => clearError());

  // -- token: asked for on a 401 only, so a loopback node without one never asks.

  const tokenPanel = $('#token-panel');
  const tokenInput = $('#token-input');
  // Closed without a token: the 401s stay in the banner, the form stays shut
  // (the header button opens it) instead of grabbing focus at every poll.
  let tokenDeclined = false;

  function askToken() {
    if (!tokenPanel.hidden || tokenDeclined) return;
    tokenPanel.hidden = false;
    tokenInput.value = '';
    tokenInput.focus();
  }

  $('[data-test="token-form"]').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, tokenInput.value.trim());
    tokenInput.value = '';
    tokenDeclined = false;
    tokenPanel.hidden = true;
    clearError();
    refreshNow();
  });
  $('[data-test="token-forget"]').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    tokenInput.value = '';
    tokenInput.focus();
  });
  $('[data-test="token-close"]').addEventListener('click', () => {
    tokenPanel.hidden = true;
    tokenDeclined = true;
  });
  $('[data-test="change-token"]').addEventListener('click', () => {
    tokenPanel.hidden = false;
    tokenInput.focus();
  });

  // -- confirm dialog: a native <dialog> (focus kept inside, Escape cancels).

  const dialog = $('dialog.confirm');

  function confirmAction(title, body, confirmLabel) {
    $('#dialog-title').textContent = title;
    const bodyEl = $('#dialog-body');
    bodyEl.replaceChildren();
    addChildren(bodyEl, [body].flat().map((x) => (typeof x === 'string' ? h('p', null, x) : x)));
    $('[data-test="confirm"]', dialog).textContent = confirmLabel || 'Confirm';
    dialog.returnValue = '';
    const opener = document.activeElement;
    dialog.showModal();
    $('[data-test="dismiss"]', dialog).focus();
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => {
        resolve(dialog.returnValue === 'ok');
        if (opener && opener.isConnected && opener.focus) opener.focus();
      }, { once: true });
    });
  }

  // Runs a mutating call after confirmation, shows its answer, refreshes the page.
  async function runAction(outcomeEl, { title, body, confirmLabel, call, done }) {
    if (!(await confirmAction(title, body, confirmLabel))) return;
    clearError();
    outcomeEl.replaceChildren();
    try {
      const answer = await call();
      addChildren(outcomeEl, [done(answer),
        h('details', null, h('summary', null, 'Answer'), h('pre', { class: 'json' }, prettyJson(answer) || '(empty)'))]);
    } catch (e) {
      showError(e, 'action');
    }
    refreshNow();
  }

  const outcomeBox = () => h('div', { class: 'outcome', role: 'status', 'data-test': 'outcome' });

  // -- regions: parts of a page that polls rewrite. A region is only rebuilt
  //    when its data changed, and focus stays on the same control in it, so
  //    keyboard users are not thrown out every 2 s.

  const FOCUSABLE = 'a[href], button, input, select, textarea, [tabindex]';

  function fill(el, data, build, clockSensitive) {
    const sig = JSON.stringify(data) + (clockSensitive ? Math.floor(Date.now() / 1000) : '');
    if (sig === el.tmSig) return;
    el.tmSig = sig;
    const active = document.activeElement;
    const index = el.contains(active) ? [...el.querySelectorAll(FOCUSABLE)].indexOf(active) : -1;
    el.replaceChildren();
    addChildren(el, [build(data)]);
    if (index >= 0) {
      const again = el.querySelectorAll(FOCUSABLE)[index];
      if (again) again.focus();
    }
  }

  const region = (attrs) => h('div', attrs);

  // -- cron schedules in words (SPEC §6); anything unusual stays as written.

  const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
  const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August',
    'September', 'October', 'November', 'December'];
  const MACROS = { '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *',
    '@weekly': '0 0 * * 0', '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *' };
  const UNITS = { s: 'second', m: 'minute', h: 'hour', d: 'day' };
  const ORDINALS = ['', 'first', 'second', 'third', 'fourth', 'fifth'];

  const plural = (n, unit) => (n === 1 ? unit : `${n} ${unit}s`);
  const isAny = (f) => f === '*' || f === '?';
  const isNum = (f) => /^\d+$/.test(f);
  const stepOf = (f) => { const m = /^(?:\*|0)\/(\d+)$/.exec(f); return m ? Number(m[1]) : null; };

  function joinWords(items) {
    return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
  }

  function named(token, names, offset) {
    if (isNum(token)) return names[(Number(token) - offset) % names.length];
    const i = names.findIndex((n) => n.slice(0, 3).toUpperCase() === token.toUpperCase());
    return i >= 0 ? names[i] : null;
  }

  // A list or range of names ("MON-FRI", "1,3,5"), or null.
  function namedSet(field, names, offset) {
    const parts = field.split(',').map((p) => {
      const r = p.split('-');
      if (r.length === 2) {
        const a = named(r[0], names, offset); const b = named(r[1], names, offset);
        return a && b ? `${a} to ${b}` : null;
      }
      return r.length === 1 ? named(p, names, offset) : null;
    });
    return parts.every(Boolean) ? joinWords(parts) : null;
  }

  // Unix cron counts Sunday as 0 (and 7); Quartz and XXL-JOB as 1.
  const WEEK = {
    unix: { first: 0, weekdays: ['1-5', 'MON-FRI'], weekends: ['0,6', '6,0', 'SAT,SUN', 'SUN,SAT'] },
    quartz: { first: 1, weekdays: ['2-6', 'MON-FRI'], weekends: ['1,7', '7,1', 'SAT,SUN', 'SUN,SAT'] },
  };

  function describeDays(dom, month, dow, dialect) {
    const ofMonth = isAny(month) ? 'of every month' : 'of the month';
    const week = WEEK[dialect] || WEEK.unix;
    const day = (token) => named(token, DAYS, week.first);
    let days;
    if (isAny(dom) && isAny(dow)) days = '';
    else if (isAny(dom)) {
      const up = dow.toUpperCase();
      let m;
      if (week.weekdays.includes(up)) days = 'on weekdays';
      else if (week.weekends.includes(up)) days = 'on weekends';
      else if ((m = /^(\w+)L$/.exec(up)) && day(m[1])) days = `on the last ${day(m[1])} ${ofMonth}`;
      else if ((m = /^(\w+)#([1-5])$/.exec(up)) && day(m[1])) days = `on the ${ORDINALS[m[2]]} ${day(m[1])} ${ofMonth}`;
      else if (/^\w+$/.test(dow) && day(dow)) days = `every ${day(dow)}`;
      else if (namedSet(dow, DAYS, week.first)) days = `on ${namedSet(dow, DAYS, week.first)}`;
      else return null;
    } else if (isAny(dow)) {
      let m;
      if (dom === 'L') days = `on the last day ${ofMonth}`;
      else if (dom === 'LW') days = `on the last weekday ${ofMonth}`;
      else if ((m = /^(\d+)W$/.exec(dom))) days = `on the weekday nearest day ${m[1]} ${ofMonth}`;
      else if (/^\d+(,\d+)*$/.test(dom)) days = `on day${dom.includes(',') ? 's' : ''} ${joinWords(dom.split(','))} ${ofMonth}`;
      else if (/^\d+-\d+$/.test(dom)) days = `on days ${dom.replace('-', ' to ')} ${ofMonth}`;
      else if (stepOf(dom)) days = `every ${plural(stepOf(dom), 'day')}`;
      else return null;
    } else {
      return null;  // both restricted: cron dialects disagree on what that means
    }
    if (isAny(month)) return days;
    const months = namedSet(month, MONTHS, 1);
    if (!months) return null;
    if (isNum(dom) && isAny(dow) && !month.includes(',') && !month.includes('-')) return `on ${dom} ${months}`;
    return `${days ? `${days} ` : ''}in ${months}`;
  }

  function describeTime(sec, min, hour) {
    const hh = (x) => pad(Number(x));
    const at = (hr, mn) => `${hh(hr)}:${hh(mn)}${isNum(sec) && sec !== '0' ? `:${hh(sec)}` : ''}`;
    if (isAny(hour) && isAny(min)) {
      if (sec === '*') return { text: 'every second', frequent: true };
      if (stepOf(sec)) return { text: `every ${plural(stepOf(sec), 'second')}`, frequent: true };
      if (isNum(sec)) return { text: sec === '0' ? 'every minute' : `every minute at second ${sec}`, frequent: true };
      return null;
    }
    if (!isNum(sec)) return null;
    if (isAny(hour)) {
      if (stepOf(min)) return { text: `every ${plural(stepOf(min), 'minute')}`, frequent: true };
      if (min === '0' && sec === '0') return { text: 'every hour, on the hour', frequent: true };
      if (isNum(min)) return { text: `every hour at ${hh(min)} minutes past`, frequent: true };
      if (/^\d+(,\d+)+$/.test(min)) return { text: `every hour at minutes ${joinWords(min.split(','))}`, frequent: true };
      return null;
    }
    if (!isNum(min)) return null;
    if (isNum(hour)) return { text: `at ${at(hour, min)}`, frequent: false };
    if (stepOf(hour)) {
      const past = min === '0' && sec === '0' ? 'on the hour' : `at ${hh(min)} minutes past`;
      return { text: `every ${plural(stepOf(hour), 'hour')}, ${past}`, frequent: true };
    }
    if (/^\d+(,\d+)+$/.test(hour)) return { text: `at ${joinWords(hour.split(',').map((x) => at(x, min)))}`, frequent: false };
    const r = /^(\d+)-(\d+)$/.exec(hour);
    if (r) return { text: `every hour from ${at(r[1], min)} to ${at(r[2], min)}`, frequent: true };
    return null;
  }

  // `dialect`: how the day-of-week field counts (unix, the default, or quartz).
  function describeSchedule(expr, dialect) {
    const raw = String(expr || '').trim();
    const every = /^@every\s+((?:\d+[smhd])+)$/i.exec(raw);
    if (every) {
      const parts = [...every[1].matchAll(/(\d+)([smhd])/gi)].map(([, n, u]) => [Number(n), UNITS[u.toLowerCase()]]);
      // "every hour", but "every 1 hour 30 minutes".
      if (parts.length === 1) return `every ${plural(...parts[0])}`;
      return `every ${parts.map(([n, u]) => `${n} ${u}${n === 1 ? '' : 's'}`).join(' ')}`;
    }
    const macro = MACROS[raw.toLowerCase()];
    const fields = (macro || raw).split(/\s+/);
    if (fields.length === 5) fields.unshift('0');
    if (fields.length !== 6) return null;
    const [sec, min, hour, dom, month, dow] = fields;
    const time = describeTime(sec, min, hour);
    const days = describeDays(dom, month, dow, macro ? 'unix' : dialect);
    if (!time || days == null) return null;
    if (!days) return time.frequent ? time.text : `${time.text} every day`;
    return `${time.text} ${days}`;
  }

  // -- throughput chart (stats.recent): bars of finished tasks per minute,
  //    stacked by outcome, and the failure rate as a line on its own scale.

  function chartSlots(recent) {
    const MIN = 60000;
    const given = new Map();
    for (const r of recent || []) {
      const t = parseTime(r.minute);
      if (t) given.set(Math.floor(t.getTime() / MIN) * MIN, r);
    }
    // Minutes without outcomes may be left out by the node: fill them with zeros.
    let end = Math.floor(Date.now() / MIN) * MIN;
    for (const t of given.keys()) end = Math.max(end, t);
    const slots = [];
    for (let i = 14; i >= 0; i--) {
      const t = end - i * MIN;
      const r = given.get(t) || {};
      const s = num(r.succeeded) || 0; const f = num(r.retried) || 0; const d = num(r.failed) || 0;
      const n = s + f + d;
      slots.push({ t: new Date(t), s, f, d, n, rate: n ? (f + d) / n : null });
    }
    return slots;
  }

  // The smallest of 1, 2, 5 × 10^n that is at least v, for a readable scale.
  function niceMax(v) {
    let e = 1;
    while (e * 10 < v) e *= 10;
    for (const m of [1, 2, 5, 10]) if (m * e >= v) return m * e;
    return v;
  }

  function renderChart(recent) {
    if (!Array.isArray(recent)) return h('p', { class: 'muted' }, 'This node does not report recent throughput (no "recent" in /v1/stats).');
    const slots = chartSlots(recent);
    const W = 600; const H = 190; const L = 44; const R = 48; const T = 12; const B = 26;
    const pw = W - L - R; const ph = H - T - B;
    const yMax = niceMax(Math.max(1, ...slots.map((x) => x.n)));
    const maxRate = Math.max(0, ...slots.map((x) => x.rate || 0));
    const rMax = [0.05, 0.1, 0.25, 0.5, 1].find((r) => r >= maxRate) || 1;
    const slotW = pw / slots.length;
    const y = (v) => T + ph - (v / yMax) * ph;
    const yr = (r) => T + ph - (r / rMax) * ph;
    const hhmm = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    const parts = [];
    for (const g of [0, 0.5, 1]) {
      parts.push(svg('line', { class: 'grid', x1: L, x2: W - R, y1: T + ph * (1 - g), y2: T + ph * (1 - g) }));
    }
    parts.push(svg('text', { class: 'axis', x: L - 6, y: T + 4, 'text-anchor': 'end' }, String(yMax)));
    parts.push(svg('text', { class: 'axis', x: L - 6, y: T + ph + 4, 'text-anchor': 'end' }, '0'));
    parts.push(svg('text', { class: 'axis rate-axis', x: W - R + 6, y: T + 4 }, `${Math.round(rMax * 100)}%`));
    parts.push(svg('text', { class: 'axis rate-axis', x: W - R + 6, y: T + ph + 4 }, '0%'));
    slots.forEach((x, i) => {
      const bx = L + i * slotW + slotW * 0.15; const bw = slotW * 0.7;
      let top = T + ph;
      const bars = [];
      for (const [v, cls] of [[x.s, 'bar-ok'], [x.f, 'bar-failed'], [x.d, 'bar-dead']]) {
        if (!v) continue;
        const hgt = (v / yMax) * ph;
        top -= hgt;
        bars.push(svg('rect', { class: cls, x: bx, y: top, width: bw, height: hgt }));
      }
      const rate = x.rate == null ? 'no tasks finished' : `${(x.rate * 100).toFixed(1)}% failed`;
      parts.push(svg('g', null, svg('title', null,
        `${hhmm(x.t)}: ${x.n} finished (${x.s} succeeded, ${x.f} to retry, ${x.d} failed for good), ${rate}`),
      svg('rect', { class: 'hit', x: L + i * slotW, y: T, width: slotW, height: ph }), bars));
      if (i % 7 === 0 || i === slots.length - 1) {
        parts.push(svg('text', { class: 'axis', x: L + (i + 0.5) * slotW, y: H - 8, 'text-anchor': 'middle' }, hhmm(x.t)));
      }
    });
    let d = ''; let pen = false;
    slots.forEach((x, i) => {
      if (x.rate == null) { pen = false; return; }
      d += `${pen ? 'L' : 'M'}${(L + (i + 0.5) * slotW).toFixed(1)},${yr(x.rate).toFixed(1)} `;
      pen = true;
      parts.push(svg('circle', { class: 'rate-dot', cx: L + (i + 0.5) * slotW, cy: yr(x.rate), r: 2.5 }));
    });
    if (d) parts.push(svg('path', { class: 'rate-line', d }));
    const total = slots.reduce((a, x) => a + x.n, 0);
    const bad = slots.reduce((a, x) => a + x.f + x.d, 0);
    const summary = `Last 15 minutes: ${total} tasks finished (${(total / 15).toFixed(1)} per minute), ` +
      `${total ? ((bad / total) * 100).toFixed(1) : '0.0'}% failed.`;
    return [
      svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': summary, 'data-test': 'chart' }, parts),
      h('ul', { class: 'legend' },
        h('li', null, h('span', { class: 'swatch bar-ok' }), 'succeeded'),
        h('li', null, h('span', { class: 'swatch bar-failed' }), 'failed, to retry'),
        h('li', null, h('span', { class: 'swatch bar-dead' }), 'failed for good'),
        h('li', null, h('span', { class: 'swatch rate-line' }), 'failure rate (right scale)')),
      h('p', { 'data-test': 'throughput-summary' }, summary),
    ];
  }

  // -- pages. Each builds its static part (headings, forms, buttons) once and
  //    returns refresh(), which the poller calls; refresh() only fills regions.

  function pageHead(title, ...rest) {
    return h('div', { class: 'page-head' }, h('h2', { tabindex: '-1', 'data-test': 'page-title' }, title), rest);
  }

  function card(title, body, extraClass) {
    return h('section', { class: `card ${extraClass || ''}` }, h('h3', null, title), body);
  }

  function overviewPage(root, params, query, ctx) {
    const totals = region({ class: 'totals' });
    const counts = region(); const chart = region(); const running = region();
    const limits = region(); const alerts = region();
    root.append(pageHead('Overview'), totals,
      h('div', { class: 'grid' },
        card('Throughput and failure rate', chart, 'wide'),
        card('Tasks per type and status', counts, 'wide'),
        card('In flight per node', running),
        card('Limits in use', limits),
        card('Recent alerts', [alerts, h('p', null, h('a', { href: '#/alerts' }, 'All alerts'))], 'wide')));

    return async () => {
      const [stats, al] = await Promise.all([api('GET', '/v1/stats'), api('GET', '/v1/alerts?limit=10')]);
      if (!ctx.alive()) return;
      const byType = stats.counts || {};
      const types = Object.keys(byType).sort();
      const sum = (status) => types.reduce((a, t) => a + (num(byType[t][status]) || 0), 0);
      // Finished tasks of a large table are counted from a sample: say so.
      const estimated = new Set(stats.estimated || []);
      const approx = (s, n) => (estimated.has(s) ? `≈${n}` : String(n));
      fill(totals, [byType, stats.estimated], () => STATUSES.map((s) => h('a',
        { class: `total st-${s}`, href: hashFor('tasks', { status: s }), 'data-test': 'total', 'data-status': s,
          title: estimated.has(s) ? 'estimated from a sample of the task table' : null },
        h('span', { class: 'total-n' }, approx(s, sum(s))), h('span', { class: 'total-label' }, s))));
      fill(counts, [byType, stats.estimated], () => {
        if (!types.length) return h('p', { class: 'muted' }, 'No tasks yet.');
        const cell = (type, status, n) => h('td', { class: 'n', 'data-test': 'count', 'data-type': type, 'data-status': status },
          n ? h('a', { href: hashFor('tasks', { type: type === '*' ? '' : type, status }) }, approx(status, n)) : h('span', { class: 'muted' }, '0'));
        const rows = types.map((t) => h('tr', null, h('th', { scope: 'row' }, h('a', { href: hashFor('tasks', { type: t }) }, t)),
          STATUSES.map((s) => cell(t, s, num(byType[t][s]) || 0)),
          h('td', { class: 'n' }, String(STATUSES.reduce((a, s) => a + (num(byType[t][s]) || 0), 0)))));
        rows.push(h('tr', { class: 'sum' }, h('th', { scope: 'row' }, 'all types'), STATUSES.map((s) => cell('*', s, sum(s))),
          h('td', { class: 'n' }, String(STATUSES.reduce((a, s) => a + sum(s), 0)))));
        return tableOf('Tasks per type and status', ['Type', ...STATUSES, 'total'], rows, { 'data-test': 'counts' });
      });
      fill(chart, stats.recent, renderChart);
      fill(running, stats.running_by_node, (nodes) => (nodes && nodes.length
        ? tableOf('In flight per node', ['Node', 'Running'], nodes.map((n) => h('tr', { 'data-test': 'node-running', 'data-node': n.node },
          h('td', null, n.node), h('td', { class: 'n' }, String(num(n.running) ?? 0)))))
        : h('p', { class: 'muted' }, 'No nodes.')));
      fill(limits, stats.limiter, (lim) => (lim && lim.length
        ? tableOf('Limits in use', ['Scope', 'In use', ''], lim.map((l) => {
          const used = num(l.used) || 0; const max = num(l.limit);
          return h('tr', { 'data-test': 'limit-row', 'data-scope': l.scope },
            h('td', null, l.scope),
            h('td', { class: 'n' }, max ? `${used} / ${max}` : `${used} (no limit)`),
            h('td', null, max ? h('meter',
              { min: 0, max, value: Math.min(used, max), high: max * 0.8, optimum: 0, 'aria-label': `${l.scope} in use` }) : null));
        }))
        : h('p', { class: 'muted' }, 'No limits.')));
      fill(alerts, al.alerts, (list) => alertTable(list || [], 'Recent alerts'));
    };
  }

  function alertTable(list, label) {
    if (!list.length) return h('p', { class: 'muted' }, 'No alerts.');
    // The node answers the newest N in ascending id order; show newest first.
    const rows = [...list].sort((a, b) => (num(b.id) || 0) - (num(a.id) || 0)).map((a) => {
      const subject = [];
      if (a.task_id != null) subject.push(h('a', { href: taskHref(a.task_id) }, `task ${a.task_id}`));
      if (a.batch) subject.push(h('a', { href: batchHref(a.batch) }, `batch ${a.batch}`));
      if (a.job) subject.push(h('a', { href: jobHref(a.job) }, `job ${a.job}`));
      if (!subject.length && a.type) subject.push(h('a', { href: hashFor('tasks', { type: a.type }) }, `type ${a.type}`));
      const deliveries = a.deliveries || [];
      const delivered = deliveries.filter((d) => d.delivered_at).length;
      const failing = deliveries.find((d) => !d.delivered_at && d.last_error);
      return h('tr', { 'data-test': 'alert-row', 'data-id': a.id },
        h('td', null, timeEl(a.raised_at)),
        h('td', null, h('span', { class: `badge kind-${a.kind}` }, a.kind)),
        h('td', null, a.message),
        h('td', null, subject.length ? subject.flatMap((x, i) => (i ? [', ', x] : [x])) : a.subject),
        h('td', null, deliveries.length ? `${delivered}/${deliveries.length} delivered` : 'no webhook',
          failing ? h('div', { class: 'muted small' }, `last error: ${failing.last_error}`) : null));
    });
    return tableOf(label, ['Raised', 'Kind', 'Message', 'Subject', 'Webhooks'], rows);
  }

  function alertsPage(root, params, query, ctx) {
    const list = region();
    root.append(pageHead('Alerts'), h('p', { class: 'muted' }, 'The last 100 alerts, newest first.'), list);
    return async () => {
      const al = await api('GET', '/v1/alerts?limit=100');
      if (ctx.alive()) fill(list, al.alerts, (a) => alertTable(a || [], 'Alerts'));
    };
  }

  const TASK_FILTERS = ['type', 'key', 'status', 'batch', 'limit'];

  function tasksPage(root, params, query, ctx) {
    const q = Object.fromEntries(TASK_FILTERS.map((k) => [k, query.get(k) || '']));
    const pageToken = query.get('page_token') || '';
    const input = (name, label) => h('div', { class: 'field' }, h('label', { for: `f-${name}` }, label),
      h('input', { id: `f-${name}`, name, value: q[name], 'data-test': `filter-${name}`, autocomplete: 'off' }));
    const select = (name, label, options) => h('div', { class: 'field' }, h('label', { for: `f-${name}` }, label),
      h('select', { id: `f-${name}`, name, 'data-test': `filter-${name}` },
        options.map(([v, text]) => h('option', { value: v, selected: v === q[name] }, text))));
    const form = h('form', { class: 'filters', 'data-test': 'filters', role: 'search' },
      input('type', 'Type'), input('key', 'Key'),
      select('status', 'Status', [['', 'any'], ...STATUSES.map((s) => [s, s])]),
      input('batch', 'Batch'),
      select('limit', 'Per page', [['', '100'], ['20', '20'], ['50', '50'], ['200', '200'], ['500', '500']]),
      h('div', { class: 'field buttons' },
        h('button', { type: 'submit', class: 'primary', 'data-test': 'filter-apply' }, 'Apply'),
        h('button', { type: 'button', 'data-test': 'filter-clear', onclick: () => navigate('#/tasks') }, 'Clear')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const data = new FormData(form);
      navigate(hashFor('tasks', Object.fromEntries(TASK_FILTERS.map((k) => [k, String(data.get(k) || '').trim()]))));
    });
    const list = region(); const pager = region({ class: 'pager' });
    root.append(pageHead('Tasks'), form, list, pager);

    return async () => {
      const apiQuery = new URLSearchParams();
      for (const k of TASK_FILTERS) if (q[k]) apiQuery.set(k, q[k]);
      if (pageToken) apiQuery.set('page_token', pageToken);
      const res = await api('GET', `/v1/tasks?${apiQuery}`);
      if (!ctx.alive()) return;
      fill(list, res.tasks, (tasks) => {
        if (!tasks || !tasks.length) return h('p', { class: 'muted' }, 'No tasks match.');
        return tableOf('Tasks', ['ID', 'Type', 'Key', 'Version', 'Status', 'Priority', 'Execute at', 'Attempt', 'Retries', 'Node', 'Batch', 'Error'],
          tasks.map((t) => h('tr', { 'data-test': 'task-row', 'data-id': t.id },
            h('td', null, h('a', { href: taskHref(t.id) }, String(t.id))),
            h('td', null, t.type),
            h('td', null, h('a', { href: taskHref(t.id), tabindex: '-1' }, t.key)),
            h('td', { class: 'n' }, String(t.version)),
            h('td', null, statusBadge(t.status)),
            h('td', { class: 'n' }, String(t.priority)),
            h('td', null, timeEl(t.execute_at)),
            h('td', { class: 'n' }, String(t.attempt)),
            h('td', { class: 'n' }, `${t.retry_count}/${t.max_retries}`),
            h('td', null, t.picked_by || ''),
            h('td', null, t.batch ? h('a', { href: batchHref(t.batch) }, t.batch) : ''),
            h('td', { class: 'error-cell', title: t.error || '' }, t.error ? t.error.slice(0, 80) : ''))));
      });
      const short = res.next_page_token && (res.tasks || []).length < Number(q.limit || 100);
      fill(pager, [pageToken, res.next_page_token, short], () => [
        // A page reads a bounded stretch of the table; a rare match may lie further on.
        short ? h('span', { class: 'muted', 'data-test': 'scanned-to' }, `Looked through tasks down to id ${res.next_page_token}; older ones may match too. `) : null,
        pageToken ? h('a', { class: 'button', href: hashFor('tasks', q), 'data-test': 'first-page' }, 'First page') : null,
        res.next_page_token ? h('a', { class: 'button', href: hashFor('tasks', { ...q, page_token: res.next_page_token }), 'data-test': 'next-page' },
          'Older') : null,
      ]);
    };
  }

  // datetime-local value, read in the browser's zone or in UTC, as RFC 3339 UTC.
  function inputToRfc3339(value, utc) {
    const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(value || '');
    if (!m) return null;
    const [y, mo, d, hr, mi, s] = m.slice(1).map((x) => Number(x || 0));
    const date = utc ? new Date(Date.UTC(y, mo - 1, d, hr, mi, s)) : new Date(y, mo - 1, d, hr, mi, s);
    return Number.isNaN(date.getTime()) ? null : date.toISOString().replace('.000Z', 'Z');
  }

  function rfc3339ToInput(s, utc) {
    const d = parseTime(s);
    if (!d) return '';
    const get = (local, u) => (utc ? d[u]() : d[local]());
    return `${get('getFullYear', 'getUTCFullYear')}-${pad(get('getMonth', 'getUTCMonth') + 1)}-${pad(get('getDate', 'getUTCDate'))}` +
      `T${pad(get('getHours', 'getUTCHours'))}:${pad(get('getMinutes', 'getUTCMinutes'))}:${pad(get('getSeconds', 'getUTCSeconds'))}`;
  }

  const TASK_FIELDS = [
    ['id', 'ID'], ['type', 'Type'], ['key', 'Key'], ['version', 'Version'], ['status', 'Status'],
    ['priority', 'Priority'], ['execute_at', 'Execute at'], ['attempt', 'Attempt'],
    ['retry_count', 'Retry count'], ['max_retries', 'Max retries'], ['timeout_ms', 'Timeout (ms)'],
    ['backoff', 'Backoff'], ['picked_by', 'Picked by'], ['batch', 'Batch'], ['shard_index', 'Shard'],
    ['key_space', 'Key space'], ['concurrency_key', 'Concurrency key'], ['key_class', 'Key class'],
    ['trace_id', 'Trace ID'], ['heartbeat_at', 'Heartbeat at'], ['started_at', 'Started at'],
    ['created_at', 'Created at'], ['updated_at', 'Updated at'], ['progress', 'Progress'],
    ['parents', 'After (parents)'], ['children', 'Before (children)'],
  ];
  const TASK_SHOWN_ELSEWHERE = new Set(['payload', 'result', 'error', 'waiting', 'shard_total']);

  function taskFieldValue(t, name) {
    const v = t[name];
    if (name === 'status') return statusBadge(v, { 'data-test': null });
    if (name === 'batch') return v ? h('a', { href: batchHref(v) }, v) : null;
    if (name === 'key_space') return v ? h('a', { href: keySpaceHref(v) }, v) : null;
    if (name === 'concurrency_key') return t.key_space ? h('a', { href: keyHref(t.key_space, v) }, keyName(v)) : null;
    if (name === 'parents' || name === 'children') {
      if (!v || !v.length) return null;
      return v.flatMap((task, i) => [i ? ', ' : null, h('a', { href: taskHref(task) }, String(task))]);
    }
    if (name === 'shard_index') return t.shard_total != null ? `${v} of ${t.shard_total}` : null;
    if (name === 'progress') {
      if (!v) return null;
      const parts = [v.progress != null ? `${Math.round(v.progress * 100)}%` : null,
        `${v.processed} processed, ${v.failed} failed`, v.message,
        `attempt ${v.attempt}, reported `];
      return h('span', { 'data-test': 'task-progress' }, parts.filter((p) => p != null).join(' — '),
        timeEl(v.reported_at, true));
    }
    if (name === 'backoff') {
      if (!v || !v.kind || v.kind === 'unspecified') return 'the type\'s default';
      return `${v.kind}, base ${v.base_ms} ms${v.cap_ms ? `, cap ${v.cap_ms} ms` : ''}, jitter ${v.jitter}`;
    }
    if (/_at$/.test(name)) return v ? timeEl(v, true) : null;
    if (v != null && typeof v === 'object') return JSON.stringify(v);
    return v == null ? null : String(v);
  }

  function taskPage(root, params, query, ctx) {
    const id = params[0];
    const head = region({ class: 'task-head' }); const waiting = region(); const fields = region();
    const errorBox = region(); const payload = region(); const result = region(); const attempts = region();
    const outcome = outcomeBox();
    let task = null;
    // The attempt log tails: each refresh asks for the lines after the last
    // one shown, and the view keeps the latest LOG_LINES_SHOWN.
    const logLines = h('pre', { class: 'log-lines', 'data-test': 'task-log', tabindex: '0' });
    const logEmpty = h('p', { class: 'muted', 'data-test': 'task-log-empty' }, 'Nothing logged.');
    let logAfter = 0;
    const appendLog = (res) => {
      const lines = res.lines || [];
      if (!lines.length) return;
      logAfter = res.next_after;
      const atEnd = logLines.scrollTop + logLines.clientHeight >= logLines.scrollHeight - 4;
      for (const l of lines) {
        logLines.append(h('div', { class: 'log-line', 'data-test': 'log-line', 'data-attempt': l.attempt },
          h('span', { class: 'muted' }, `${fmtTime(l.logged_at)} #${l.attempt} `), l.line));
      }
      while (logLines.childElementCount > LOG_LINES_SHOWN) logLines.firstElementChild.remove();
      logEmpty.hidden = true;
      if (atEnd) logLines.scrollTop = logLines.scrollHeight;
    };

    const zone = h('select', { id: 'reschedule-zone', 'data-test': 'reschedule-zone' },
      h('option', { value: 'local' }, `local time (${Intl.DateTimeFormat().resolvedOptions().timeZone || 'browser'})`),
      h('option', { value: 'utc' }, 'UTC'));
    const at = h('input', { id: 'reschedule-at', type: 'datetime-local', step: '1', 'data-test': 'reschedule-at' });
    const preview = h('span', { class: 'muted', 'data-test': 'reschedule-preview', 'aria-live': 'polite' });
    const newTime = () => inputToRfc3339(at.value, zone.value === 'utc');
    const updatePreview = () => { preview.textContent = newTime() ? `sends ${newTime()}` : ''; };
    at.addEventListener('input', updatePreview);
    zone.addEventListener('change', updatePreview);
    const taskPath = `/v1/tasks/${encodeURIComponent(id)}`;
    const describeAnswer = (verb, r) => {
      const t = r.task || r;
      return h('p', null, `${verb}: `, r.outcome ? h('strong', null, r.outcome) : null, r.outcome ? ' — ' : '',
        'task ', h('a', { href: taskHref(t.id) }, String(t.id)), ` is ${t.status}`,
        t.execute_at && (t.status === 'pending' || t.status === 'failed') ? [', due ', timeEl(t.execute_at)] : null, '.',
        String(t.id) !== String(id) ? ' (a different task than this one)' : '');
    };

    const actions = h('section', { class: 'actions', 'aria-labelledby': 'actions-title' },
      h('h3', { id: 'actions-title' }, 'Actions'),
      h('div', { class: 'action-row' },
        h('button', { type: 'button', 'data-test': 'retry', onclick: () => runAction(outcome, {
          title: `Retry task ${id}?`,
          body: 'It becomes pending and due now; its retry count starts again from 0. A running task must be cancelled first.',
          confirmLabel: 'Retry',
          call: () => api('POST', `${taskPath}/retry`),
          done: (r) => describeAnswer('Retried', r),
        }) }, 'Retry'),
        h('button', { type: 'button', class: 'danger', 'data-test': 'cancel', onclick: () => runAction(outcome, {
          title: `Cancel task ${id}?`,
          body: 'A pending or failed task will not run; a running one is marked cancelled and its outcome will change nothing.',
          confirmLabel: 'Cancel task',
          // As a string: the API takes 64-bit integers either way, and a string loses no digits.
          call: () => api('POST', '/v1/tasks/cancel', { id: String(id) }),
          done: (r) => describeAnswer('Cancel', r),
        }) }, 'Cancel')),
      h('form', { class: 'inline-form', onsubmit: (ev) => {
        ev.preventDefault();
        const when = newTime();
        if (!when) return showError(new ApiError(0, 'invalid_argument', 'pick the new execute time first'), 'action');
        if (!task) return showError(new ApiError(0, 'console', 'the task is not loaded yet'), 'action');
        runAction(outcome, {
          title: `Reschedule ${task.type} / ${task.key}?`,
          body: [h('p', null, 'New execute time: ', h('strong', null, when), ` (${fmtTime(when)} local).`),
            'This acts on the current version of this type and key: a pending or failed task moves, '
              + 'a running one is cancelled and a copy is made, a dead one is re-armed.'],
          confirmLabel: 'Reschedule',
          call: () => api('POST', '/v1/tasks/reschedule', { type: task.type, key: task.key, execute_at: when }),
          done: (r) => describeAnswer('Reschedule', r),
        });
      } },
      h('label', { for: 'reschedule-at' }, 'New execute time'), at,
      h('label', { for: 'reschedule-zone', class: 'sr-only' }, 'Time zone of the new execute time'), zone,
      h('button', { type: 'submit', 'data-test': 'reschedule' }, 'Reschedule'), preview),
      outcome);

    root.append(pageHead(`Task ${id}`, head), waiting, actions,
      h('div', { class: 'two-col' },
        card('Fields', fields),
        h('div', { class: 'stack' }, card('Error', errorBox), card('Payload', payload), card('Result', result))),
      card('Attempts', attempts),
      card('Log', h('div', null, logEmpty, logLines)));

    const showWaiting = (why) => fill(waiting, why || null, (w) => (w ? h('section', { class: 'waiting', 'data-test': 'waiting', 'data-reason': w.reason },
      h('h3', null, 'Why isn\'t it running?'),
      h('p', { class: 'waiting-message' }, w.message || w.reason),
      h('p', { class: 'muted' }, `Reason: ${w.reason}`, w.until ? [' · until ', timeEl(w.until, true)] : null)) : null), true);

    return async () => {
      // While PostgreSQL is away the read fails, and the failure says why
      // the task is not running either.
      const [t, at2, log] = await Promise.all([api('GET', taskPath), api('GET', `${taskPath}/attempts`),
        api('GET', `${taskPath}/logs?after=${logAfter}`)]).catch((e) => {
        if (e.waiting && ctx.alive()) showWaiting(e.waiting);
        throw e;
      });
      if (!ctx.alive()) return;
      task = t;
      appendLog(log);
      if (!at.value && document.activeElement !== at) { at.value = rfc3339ToInput(t.execute_at, zone.value === 'utc'); updatePreview(); }
      fill(head, [t.status, t.type, t.key, t.version], () => [statusBadge(t.status),
        h('span', { class: 'muted' }, ` ${t.type} / ${t.key} v${t.version}`)]);
      showWaiting(t.waiting);
      fill(fields, t, () => {
        const known = new Set(TASK_FIELDS.map(([n]) => n));
        const extra = Object.keys(t).filter((k) => !known.has(k) && !TASK_SHOWN_ELSEWHERE.has(k));
        return fieldList([...TASK_FIELDS, ...extra.map((k) => [k, k])].map(([n, label]) => [n, label, taskFieldValue(t, n)]));
      }, true);
      fill(errorBox, t.error, (e) => (e ? h('pre', { class: 'error-text', 'data-test': 'task-error' }, e)
        : h('p', { class: 'muted', 'data-test': 'task-error' }, 'none')));
      fill(payload, t.payload, (p) => jsonBlock(p, 'payload'));
      fill(result, t.result, (r) => jsonBlock(r, 'result'));
      fill(attempts, at2.attempts, (list) => (list && list.length
        ? tableOf('Attempts', ['Attempt', 'Node', 'Started', 'Finished', 'Duration', 'Outcome', 'Error'],
          list.map((a) => h('tr', { 'data-test': 'attempt-row', 'data-attempt': a.attempt },
            h('td', { class: 'n' }, String(a.attempt)), h('td', null, a.node || ''),
            h('td', null, timeEl(a.started_at)), h('td', null, timeEl(a.finished_at)),
            h('td', { class: 'n' }, a.duration_ms != null ? `${a.duration_ms} ms` : ''),
            h('td', null, a.outcome ? h('span', { class: `badge out-${a.outcome}` }, a.outcome) : h('span', { class: 'muted' }, 'in progress')),
            h('td', { class: 'error-cell' }, a.error || ''))))
        : h('p', { class: 'muted' }, 'No attempts yet.')));
    };
  }

  function countsSummary(counts) {
    const entries = STATUSES.filter((s) => num(counts && counts[s])).map((s) => `${num(counts[s])} ${s}`);
    return entries.length ? entries.join(' · ') : 'no tasks';
  }

  function rerunButton(batch, outcome) {
    return h('button', { type: 'button', class: 'small', 'data-test': 'rerun-failed', 'data-batch': batch, onclick: () => runAction(outcome, {
      title: 'Rerun failed tasks?',
      body: [h('p', null, 'Failed and dead tasks of batch ', h('strong', null, batch), ' become pending and due now.')],
      confirmLabel: 'Rerun failed',
      call: () => api('POST', `/v1/batches/${encodeURIComponent(batch)}/retry-failed`),
      done: (r) => h('p', null, `Re-armed ${num(r.retried) ?? 0} task(s) of batch `, h('a', { href: batchHref(batch) }, batch), '.'),
    }) }, 'Rerun failed');
  }

  // The records a batch's tasks reported processed and failed (progress).
  function recordsLine(records) {
    const processed = num(records && records.processed) ?? 0;
    if (!processed) return null;
    const failed = num(records.failed) ?? 0;
    return h('p', { 'data-test': 'batch-records' }, 'Records: ', h('strong', null, String(processed)), ' processed, ',
      h('strong', null, String(failed)), ` failed (${(100 * failed / processed).toFixed(1)}%)`);
  }

  function batchesPage(root, params, query, ctx) {
    const batch = params[0] || '';
    const input = h('input', { id: 'batch-input', name: 'batch', value: batch, required: true, 'data-test': 'batch-input', autocomplete: 'off', size: 40 });
    const form = h('form', { class: 'inline-form', 'data-test': 'batch-form', onsubmit: (ev) => {
      ev.preventDefault();
      if (input.value.trim()) navigate(batchHref(input.value.trim()));
    } }, h('label', { for: 'batch-input' }, 'Batch id'), input,
    h('button', { type: 'submit', class: 'primary', 'data-test': 'batch-show' }, 'Show'));
    root.append(pageHead('Batches'), form,
      h('p', { class: 'muted' }, 'A job firing\'s batch is ', h('code', null, '<job>@<fire time>'), '; the job pages link to theirs.'));
    if (!batch) return null;

    const counts = region(); const outcome = outcomeBox();
    const at = batch.indexOf('@');
    const job = at > 0 && parseTime(batch.slice(at + 1)) ? batch.slice(0, at) : null;
    root.append(h('section', { class: 'card' }, h('h3', null, 'Batch ', h('code', null, batch)),
      job ? h('p', null, 'A firing of job ', h('a', { href: jobHref(job) }, job), '.') : null,
      counts,
      h('div', { class: 'action-row' }, rerunButton(batch, outcome),
        h('a', { class: 'button', href: hashFor('tasks', { batch }), 'data-test': 'batch-tasks' }, 'List its tasks')),
      outcome));

    return async () => {
      const b = await api('GET', `/v1/batches/${encodeURIComponent(batch)}`);
      if (!ctx.alive()) return;
      fill(counts, b, () => {
        const c = b.counts || {};
        const extra = Object.keys(c).filter((s) => !STATUSES.includes(s));
        return [tableOf('Tasks per status', ['Status', 'Tasks'], [...STATUSES, ...extra].map((s) => h('tr', null,
          h('td', null, h('span', { class: `badge st-${s}` }, s)),
          h('td', { class: 'n', 'data-test': 'batch-count', 'data-status': s },
            num(c[s]) ? h('a', { href: hashFor('tasks', { batch, status: s }) }, String(num(c[s]))) : '0')))),
        h('p', null, 'Total: ', h('strong', { 'data-test': 'batch-total' }, String(num(b.total) ?? 0))),
        recordsLine(b.records)];
      });
    };
  }

  function jobsPage(root, params, query, ctx) {
    const list = region();
    root.append(pageHead('Jobs'), list);
    return async () => {
      const res = await api('GET', '/v1/jobs');
      if (!ctx.alive()) return;
      fill(list, res.jobs, (jobs) => (jobs && jobs.length
        ? tableOf('Jobs', ['Name', 'Schedule', 'Time zone', 'Type', 'State', 'Next fire'], jobs.map((j) => h('tr',
          { 'data-test': 'job-row', 'data-name': j.name },
          h('td', null, h('a', { href: jobHref(j.name) }, j.name)),
          h('td', null, h('code', null, j.schedule), h('div', { class: 'muted small', 'data-test': 'schedule-words' }, describeSchedule(j.schedule, j.dialect) || '')),
          h('td', null, j.time_zone || 'UTC'),
          h('td', null, h('a', { href: hashFor('tasks', { type: j.type }) }, j.type)),
          h('td', null, jobState(j)),
          h('td', null, j.enabled ? timeEl(j.next_fire_at, true) : h('span', { class: 'muted' }, 'paused')))))
        : h('p', { class: 'muted' }, 'No jobs defined.')), true);
    };
  }

  const jobState = (j, tested = true) => h('span', { class: `badge ${j.enabled ? 'st-succeeded' : 'st-cancelled'}`, 'data-test': tested ? 'job-state' : null },
    j.enabled ? 'active' : 'paused');

  function jobPage(root, params, query, ctx) {
    const name = params[0];
    const path = jobPath(name);
    const head = region(); const fields = region(); const next = region(); const firings = region();
    const outcome = outcomeBox();
    const payloadError = h('p', { class: 'field-error', id: 'trigger-error', 'data-test': 'trigger-error', role: 'alert', hidden: true });
    const payload = h('textarea', { id: 'trigger-payload', rows: 4, spellcheck: 'false', 'data-test': 'trigger-payload',
      'aria-describedby': 'trigger-hint trigger-error', placeholder: '{"example": true}' });
    const firedAnswer = (verb) => (r) => h('p', null, `${verb}: `, h('strong', null, r.outcome || 'done'),
      r.fire_at ? [' at ', timeEl(r.fire_at)] : null,
      r.batch ? [', batch ', h('a', { href: batchHref(r.batch) }, r.batch)] : null, '.');
    const jobAnswer = (verb) => (j) => h('p', null, `${verb}: job ${j.name} is `, jobState(j, false),
      j.next_fire_at ? [', next fire ', timeEl(j.next_fire_at)] : null, '.');
    const simple = (action, verb, text) => h('button', { type: 'button', 'data-test': action, onclick: () => runAction(outcome, {
      title: `${verb} job ${name}?`, body: text, confirmLabel: verb,
      call: () => api('POST', `${path}/${action}`), done: jobAnswer(verb === 'Pause' ? 'Paused' : 'Resumed'),
    }) }, verb);

    const trigger = h('form', { class: 'trigger-form', onsubmit: (ev) => {
      ev.preventDefault();
      const text = payload.value.trim();
      payloadError.hidden = true;
      payload.removeAttribute('aria-invalid');
      if (text) {
        try {
          JSON.parse(text);
        } catch (e) {
          payloadError.textContent = `The payload is not valid JSON: ${e.message}`;
          payloadError.hidden = false;
          payload.setAttribute('aria-invalid', 'true');
          payload.focus();
          return;
        }
      }
      runAction(outcome, {
        title: `Trigger job ${name} now?`,
        body: text ? 'It fires once now, with the payload you gave.' : 'It fires once now, with the job\'s own payload.',
        confirmLabel: 'Trigger',
        // Spliced in as text so that big integers in the payload keep every digit.
        call: () => api('POST', `${path}/trigger`, text ? `{"payload":${text}}` : ''),
        done: firedAnswer('Triggered'),
      });
    } },
    h('label', { for: 'trigger-payload' }, 'Payload override (JSON, optional)'),
    h('p', { class: 'muted small', id: 'trigger-hint' }, 'Leave empty to use the job\'s payload.'),
    payload, payloadError,
    h('button', { type: 'submit', class: 'primary', 'data-test': 'trigger' }, 'Trigger now'));

    root.append(pageHead(`Job ${name}`, head),
      h('section', { class: 'actions', 'aria-labelledby': 'job-actions' }, h('h3', { id: 'job-actions' }, 'Actions'),
        h('div', { class: 'action-row' },
          simple('pause', 'Pause', 'It will not fire until resumed; tasks already created still run.'),
          simple('resume', 'Resume', 'It fires next at its next fire time from now; the times it was paused are not made up.')),
        trigger, outcome),
      h('div', { class: 'grid' },
        card('Definition', fields),
        card('Next 5 fire times', next),
        card('Last firings', firings, 'wide')));

    return async () => {
      const [j, times, f] = await Promise.all([api('GET', path), api('GET', `${path}/next?count=5`), api('GET', `${path}/firings?limit=20`)]);
      if (!ctx.alive()) return;
      fill(head, [j.enabled], () => jobState(j));
      fill(fields, j, () => {
        const words = describeSchedule(j.schedule, j.dialect);
        return [fieldList([
          ['schedule', 'Schedule', [h('code', null, j.schedule), h('div', { 'data-test': 'schedule-words' },
            words ? `${words}${j.time_zone && j.time_zone !== 'UTC' ? ` (${j.time_zone} time)` : ' (UTC)'}` : 'as written')]],
          ['dialect', 'Day numbers', j.dialect === 'quartz' ? 'Quartz: 1 is Sunday, 7 Saturday' : 'Unix: 0 and 7 are Sunday'],
          ['time_zone', 'Time zone', j.time_zone || 'UTC'],
          ['type', 'Task type', h('a', { href: hashFor('tasks', { type: j.type }) }, j.type)],
          ['enabled', 'State', jobState(j, false)],
          ['next_fire_at', 'Next fire', j.next_fire_at ? timeEl(j.next_fire_at, true) : null],
          ['routing', 'Routing', `${j.routing}${j.shards != null ? ` (${j.shards} shards)` : ''}`],
          ['overlap', 'Overlap', j.overlap],
          ['misfire', 'Misfire', `${j.misfire}${j.misfire === 'catch_up' ? ` (at most ${j.catch_up_limit})` : ''}`],
          ['priority', 'Priority', j.priority != null ? String(j.priority) : 'the type\'s'],
          ['max_retries', 'Max retries', j.max_retries != null ? String(j.max_retries) : 'the type\'s'],
          ['timeout_ms', 'Timeout (ms)', j.timeout_ms != null ? String(j.timeout_ms) : 'the type\'s'],
          ['backoff', 'Backoff', j.backoff ? JSON.stringify(j.backoff) : 'the type\'s'],
          ['description', 'Description', j.description],
          ['child_jobs', 'Then, on success', jobLinks(j.child_jobs)],
          ['child_jobs_on_failure', 'Then, on failure', jobLinks(j.child_jobs_on_failure)],
          ['on_finish', 'On finish', j.on_finish ? h('code', null, j.on_finish.type) : 'none'],
          ['on_success', 'On success', j.on_success ? h('code', null, j.on_success.type) : 'none'],
          ['source', 'Defined by', j.source],
          ['created_at', 'Created', timeEl(j.created_at)],
          ['updated_at', 'Updated', timeEl(j.updated_at)],
        ]), h('h4', null, 'Payload'), jsonBlock(j.payload, 'job-payload')];
      }, true);
      fill(next, [times.times, times.paused], ([list, paused]) => (list && list.length
        ? [paused ? h('p', { class: 'muted', 'data-test': 'next-paused' }, 'Paused; were it resumed now:') : null,
          h('ol', { class: 'times' }, list.map((t) => h('li', { 'data-test': 'next-fire' }, timeEl(t, true))))]
        : h('p', { class: 'muted' }, 'It never fires again.')), true);
      fill(firings, f.firings, (list) => (list && list.length
        ? tableOf('Last firings', ['Fire time', 'Kind', 'Outcome', 'Batch', 'Tasks', ''], list.map((x) => h('tr',
          { 'data-test': 'firing-row', 'data-batch': x.batch },
          h('td', null, timeEl(x.fire_at)),
          h('td', { 'data-test': 'firing-kind' }, x.parent
            ? ['child of ', h('a', { href: jobHref(x.parent.job) }, x.parent.job)] : x.kind),
          h('td', null, h('span', { class: `badge fo-${x.outcome}` }, x.outcome)),
          h('td', null, x.batch ? h('a', { href: batchHref(x.batch) }, x.batch) : ''),
          h('td', null, x.batch ? h('a', { href: hashFor('tasks', { batch: x.batch }) }, countsSummary(x.counts)) : countsSummary(x.counts)),
          h('td', null, x.batch ? rerunButton(x.batch, outcome) : null))))
        : h('p', { class: 'muted' }, 'No firings yet.')));
    };
  }

  function nodesPage(root, params, query, ctx) {
    const nodes = region(); const peers = region(); const execs = region();
    root.append(pageHead('Nodes'), card('Nodes', nodes),
      h('div', { class: 'grid' }, card('Links of the answering node', peers), card('Remote executors', execs)));
    const linkTable = (label, links, test) => (links.length
      ? tableOf(label, ['Name', 'Address', 'State', 'Since', 'Last error'], links.map((l) => h('tr', { 'data-test': test, 'data-name': l.name },
        h('td', null, l.name), h('td', null, l.address || ''),
        h('td', null, h('span', { class: `badge link-${l.state}` }, l.state)),
        h('td', null, timeEl(l.since, true)), h('td', { class: 'error-cell' }, l.last_error || ''))))
      : h('p', { class: 'muted' }, 'None.'));
    return async () => {
      const res = await api('GET', '/v1/nodes');
      if (!ctx.alive()) return;
      const links = res.links || [];
      fill(nodes, res.nodes, (list) => (list && list.length
        ? tableOf('Nodes', ['Name', 'Address', 'Role', 'Heartbeat', 'Started', 'Running', 'Link from here'], list.map((n) => {
          const hb = parseTime(n.heartbeat_at);
          const age = hb ? Math.max(0, Math.round((Date.now() - hb.getTime()) / 1000)) : null;
          return h('tr', { 'data-test': 'node-row', 'data-name': n.name },
            h('td', null, n.name), h('td', null, n.address || ''),
            h('td', null, h('span', { class: `badge role-${n.role}`, 'data-test': 'role' }, n.role)),
            h('td', { 'data-test': 'heartbeat-age', 'data-seconds': age ?? '' },
              hb ? h('time', { datetime: n.heartbeat_at, title: n.heartbeat_at }, `${age} s ago`) : '—'),
            h('td', null, timeEl(n.started_at)),
            h('td', { class: 'n' }, String(num(n.running) ?? 0)),
            h('td', null, h('span', { class: `badge link-${n.link || 'none'}`, 'data-test': 'node-link' }, n.link || 'none')));
        }))
        : h('p', { class: 'muted' }, 'No nodes.')), true);
      fill(peers, links.filter((l) => l.kind !== 'executor'), (l) => linkTable('Links to nodes', l, 'link-row'), true);
      fill(execs, links.filter((l) => l.kind === 'executor'), (l) => linkTable('Remote executors', l, 'executor-row'), true);
    };
  }

  // -- keyed limits (SPEC §4): the key spaces, a space's top keys, one key.

  function rateSpan(ms) {
    for (const [unit, size] of [['h', 3600000], ['min', 60000], ['s', 1000]]) {
      if (ms % size === 0) return `${ms / size} ${unit}`;
    }
    return `${ms} ms`;
  }

  function keysPage(root, params, query, ctx) {
    if (params.length && query.has('key')) return keyPage(root, params[0], query.get('key'), ctx);
    if (params.length) return keySpacePage(root, params[0], ctx);
    const list = region();
    root.append(pageHead('Keys'), list,
      h('p', { class: 'muted' }, 'Key spaces hold how much of one customer\'s, account\'s or downstream\'s ',
        'work runs at once and how often it starts. Change one with ', h('code', null, 'PUT /v1/key-spaces/{name}'),
        ' or ', h('code', null, '[key_spaces]'), ' in the config.'));
    return async () => {
      const res = await api('GET', '/v1/key-spaces');
      if (!ctx.alive()) return;
      fill(list, res.key_spaces, (spaces) => (spaces && spaces.length
        ? tableOf('Key spaces', ['Name', 'Limit a key', 'Rate a key', 'Types', 'Running', 'Keys running'], spaces.map((s) => h('tr',
          { 'data-test': 'space-row', 'data-name': s.name },
          h('td', null, h('a', { href: keySpaceHref(s.name) }, s.name)),
          h('td', { class: 'n' }, String(num(s.limit))),
          h('td', null, s.rate != null ? `${s.rate} per ${rateSpan(num(s.period_ms))}` : h('span', { class: 'muted' }, 'none')),
          h('td', null, (s.types || []).flatMap((t, i) => [i ? ', ' : '', h('a', { href: hashFor('tasks', { type: t }) }, t)])),
          h('td', { class: 'n', 'data-test': 'space-running' }, String(num(s.running) ?? 0)),
          h('td', { class: 'n' }, String(num(s.keys_running) ?? 0)))))
        : h('p', { class: 'muted' }, 'No key spaces.')));
    };
  }

  function limitText(k) {
    const from = { key: 'its own', class: `class ${k.key_class}`, space: 'the space\'s' }[k.limit_from] || k.limit_from;
    return `${num(k.limit)} (${from})`;
  }

  function keyRows(space, keys, test) {
    return keys.map((k) => h('tr', { 'data-test': test, 'data-key': k.key },
      h('td', null, h('a', { href: keyHref(space, k.key) }, keyName(k.key))),
      h('td', null, k.key_class || h('span', { class: 'muted' }, '—')),
      h('td', { class: 'n', 'data-test': 'key-running' }, String(num(k.running))),
      h('td', { class: 'n' }, limitText(k)),
      h('td', { class: 'n', 'data-test': 'key-due' }, String(num(k.due)))));
  }

  function keySpacePage(root, space, ctx) {
    const fields = region(); const running = region(); const due = region();
    root.append(pageHead(`Key space ${space}`), card('Settings and use', fields),
      h('div', { class: 'grid' }, card('Keys running most', running), card('Keys with most due tasks', due)));
    const headers = ['Key', 'Class', 'Running', 'Limit', 'Due'];
    return async () => {
      const s = await api('GET', `/v1/key-spaces/${segment(space)}?top=20`);
      if (!ctx.alive()) return;
      fill(fields, s, (x) => fieldList([
        ['limit', 'Limit a key', String(num(x.limit))],
        ['keys', 'Keys\' own limits', Object.keys(x.keys || {}).length ? JSON.stringify(x.keys) : null],
        ['class_path', 'Class path', x.class_path],
        ['classes', 'Classes\' limits', Object.keys(x.classes || {}).length ? JSON.stringify(x.classes) : null],
        ['rate', 'Rate a key', x.rate != null ? `${x.rate} units per ${rateSpan(num(x.period_ms))}` : 'none'],
        ['types', 'Types keyed here', (x.types || []).join(', ')],
        ['running', 'Running', `${num(x.running) ?? 0} tasks under ${num(x.keys_running) ?? 0} keys`],
        ['updated_at', 'Changed', timeEl(x.updated_at, true)]]));
      fill(running, s.top_running, (keys) => (keys && keys.length
        ? tableOf('Keys running most', headers, keyRows(space, keys, 'top-running-row'))
        : h('p', { class: 'muted' }, 'No key runs a task.')));
      fill(due, [s.top_due, s.due_capped, s.due_counted_up_to], ([keys, capped, upTo]) => [keys && keys.length
        ? tableOf('Keys with most due tasks', headers, keyRows(space, keys, 'top-due-row'))
        : h('p', { class: 'muted' }, 'No key has due tasks.'),
      capped ? h('p', { class: 'muted small', 'data-test': 'due-capped' },
        `Counted among the space's first ${Number(upTo).toLocaleString('en')} waiting tasks, by level and key: keys after them are not shown.`) : null]);
    };
  }

  function keyPage(root, space, key, ctx) {
    const fields = region(); const tasks = region();
    root.append(pageHead(`Key ${key === '' ? '""' : key} of ${space}`),
      h('p', null, h('a', { href: keySpaceHref(space) }, `Key space ${space}`)),
      card('Limit and use', fields), card('Its running tasks, then its waiting ones in the order they start', tasks));
    return async () => {
      const k = await api('GET', `/v1/key-spaces/${segment(space)}/keys/${segment(key)}?tasks=50`);
      if (!ctx.alive()) return;
      const { tasks: list, ...head } = k;
      fill(fields, head, (x) => fieldList([
        ['key_class', 'Class', x.key_class],
        ['limit', 'Limit', limitText(x)],
        ['running', 'Running', String(num(x.running))],
        ['due', 'Due', `${num(x.due)}${x.waiting_capped ? ` (among its first ${Number(x.counted_up_to).toLocaleString('en')} waiting)` : ''}`],
        ['later', 'Due later', String(num(x.later))],
        ['rate_used', 'Rate used', x.rate_used != null ? `${x.rate_used} units in the period now ending` : 'no rate'],
        ['rate_opens_at', 'Next unit frees', x.rate_opens_at ? timeEl(x.rate_opens_at, true) : null]]), true);
      fill(tasks, list, (ts) => (ts && ts.length
        ? tableOf('Tasks of the key', ['Id', 'Type', 'Key', 'Status', 'Priority', 'Due', 'Started'], ts.map((t) => h('tr',
          { 'data-test': 'key-task-row', 'data-id': t.id },
          h('td', { class: 'n' }, h('a', { href: taskHref(t.id) }, String(t.id))),
          h('td', null, t.type), h('td', null, t.key), h('td', null, statusBadge(t.status)),
          h('td', { class: 'n' }, String(num(t.priority))), h('td', null, timeEl(t.execute_at, true)),
          h('td', null, t.started_at ? timeEl(t.started_at, true) : '—'))))
        : h('p', { class: 'muted' }, 'No running or waiting tasks.')), true);
    };
  }

  function workflowsPage(root, params, query, ctx) {
    const list = region();
    root.append(pageHead('Workflows'), list,
      h('p', { class: 'muted' }, 'The 50 newest. Submit one with ', h('code', null, 'POST /v1/workflows'),
        ' or ', h('code', null, 'taskmill workflow submit FILE'), '.'));
    return async () => {
      const res = await api('GET', '/v1/workflows?limit=50');
      if (!ctx.alive()) return;
      fill(list, res.workflows, (wfs) => (wfs && wfs.length
        ? tableOf('Workflows', ['Id', 'Name', 'Status', 'Created', 'Finished'], wfs.map((w) => h('tr',
          { 'data-test': 'workflow-row', 'data-id': w.id },
          h('td', { class: 'n' }, h('a', { href: workflowHref(w.id) }, String(w.id))),
          h('td', null, w.name), h('td', null, statusBadge(w.status)),
          h('td', null, timeEl(w.created_at)), h('td', null, timeEl(w.finished_at)))))
        : h('p', { class: 'muted' }, 'No workflows yet.')), true);
    };
  }

  // A workflow's steps in columns by depth (the longest path from a step
  // without parents), edges from each parent's right side to its child's
  // left; boxes take their status's colour, and link to the step's task.
  function workflowGraph(wf) {
    const steps = wf.steps || [];
    const parents = new Map(steps.map((s) => [s.name, []]));
    for (const e of wf.edges || []) if (parents.has(e.child)) parents.get(e.child).push(e);
    const depth = new Map();
    const depthOf = (name, seen) => {
      if (depth.has(name)) return depth.get(name);
      if (seen.has(name)) return 0;
      seen.add(name);
      const d = Math.max(-1, ...parents.get(name).map((e) => depthOf(e.parent, seen))) + 1;
      depth.set(name, d);
      return d;
    };
    const columns = [];
    for (const s of steps) {
      const d = depthOf(s.name, new Set());
      (columns[d] = columns[d] || []).push(s);
    }
    const BW = 150; const BH = 44; const GX = 70; const GY = 18; const PAD = 10;
    const place = new Map();
    columns.forEach((col, c) => col.forEach((s, r) => place.set(s.name, { x: PAD + c * (BW + GX), y: PAD + r * (BH + GY) })));
    const width = PAD * 2 + columns.length * BW + (columns.length - 1) * GX;
    const height = PAD * 2 + Math.max(...columns.map((c) => c.length)) * (BH + GY) - GY;
    const edges = (wf.edges || []).filter((e) => place.has(e.parent) && place.has(e.child)).map((e) => {
      const a = place.get(e.parent); const b = place.get(e.child);
      const x1 = a.x + BW; const y1 = a.y + BH / 2; const x2 = b.x; const y2 = b.y + BH / 2;
      return svg('path', { class: `wf-edge on-${e.on_failure}`, 'data-test': 'workflow-edge',
        'data-parent': e.parent, 'data-child': e.child,
        d: `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`, 'marker-end': 'url(#wf-arrow)' },
      svg('title', null, `${e.parent} → ${e.child} (on failure: ${e.on_failure})`));
    });
    const boxes = steps.map((s) => {
      const p = place.get(s.name);
      const tasks = s.tasks || [];
      const label = s.name.length > 18 ? `${s.name.slice(0, 17)}…` : s.name;
      const box = svg('g', { class: `wf-step st-${s.status}`, 'data-test': 'workflow-step', 'data-step': s.name, 'data-status': s.status },
        svg('title', null, `${s.name}: ${s.status}${tasks.length > 1 ? ` (${tasks.length} shards)` : ''}`),
        svg('rect', { x: p.x, y: p.y, width: BW, height: BH, rx: 6 }),
        svg('text', { class: 'wf-name', x: p.x + 10, y: p.y + 18 }, label),
        svg('text', { class: 'wf-status', x: p.x + 10, y: p.y + 35 }, tasks.length > 1 ? `${s.status} · ${tasks.length} shards` : s.status));
      return tasks.length ? svg('a', { href: taskHref(tasks[0].id) }, box) : box;
    });
    return h('div', { class: 'wf-graph', role: 'img', 'aria-label': `Graph of ${steps.length} steps`, tabindex: '0' },
      svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, 'data-test': 'workflow-graph' },
        svg('defs', null, svg('marker', { id: 'wf-arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
          svg('path', { d: 'M0,0 L10,5 L0,10 z' }))),
        edges, boxes));
  }

  function workflowPage(root, params, query, ctx) {
    const id = params[0];
    const path = `/v1/workflows/${encodeURIComponent(id)}`;
    const head = region({ class: 'task-head' }); const fields = region(); const graph = region(); const steps = region();
    const outcome = outcomeBox();
    const actions = h('section', { class: 'actions', 'aria-labelledby': 'actions-title' },
      h('h3', { id: 'actions-title' }, 'Actions'),
      h('div', { class: 'action-row' },
        h('button', { type: 'button', 'data-test': 'workflow-retry', onclick: () => runAction(outcome, {
          title: `Retry workflow ${id}?`,
          body: 'Its steps that ended dead or cancelled, or were skipped for one that did, run again, each after those of its parents that run again. Steps that succeeded do not.',
          confirmLabel: 'Retry',
          call: () => api('POST', `${path}/retry`),
          done: (r) => h('p', null, `${num(r.retried) ?? 0} task(s) run again.`),
        }) }, 'Retry'),
        h('button', { type: 'button', class: 'danger', 'data-test': 'workflow-cancel', onclick: () => runAction(outcome, {
          title: `Cancel workflow ${id}?`,
          body: 'Every step that has not finished is cancelled, running ones too: their outcome, if it comes, changes nothing.',
          confirmLabel: 'Cancel workflow',
          call: () => api('POST', `${path}/cancel`),
          done: (r) => h('p', null, `${num(r.cancelled) ?? 0} task(s) cancelled.`),
        }) }, 'Cancel')),
      outcome);
    root.append(pageHead(`Workflow ${id}`, head), actions, card('Fields', fields), card('Graph', graph, 'wide'), card('Steps', steps, 'wide'));

    return async () => {
      const wf = await api('GET', path);
      if (!ctx.alive()) return;
      fill(head, [wf.status, wf.name], () => [statusBadge(wf.status), h('span', { class: 'muted' }, ` ${wf.name}`)]);
      fill(fields, wf, () => fieldList([['key', 'Key', wf.key], ['created_at', 'Created', timeEl(wf.created_at, true)],
        ['started_at', 'Started', timeEl(wf.started_at, true)], ['finished_at', 'Finished', timeEl(wf.finished_at, true)],
        ['cancelled_at', 'Cancelled', wf.cancelled_at ? timeEl(wf.cancelled_at, true) : null]]), true);
      fill(graph, [wf.steps.map((s) => s.status), wf.edges], () => workflowGraph(wf));
      fill(steps, wf.steps, (list) => tableOf('Steps', ['Step', 'Status', 'After', 'Tasks', 'Attempt', 'Started', 'Finished', 'Error'],
        list.map((s) => {
          const after = (wf.edges || []).filter((e) => e.child === s.name).map((e) => (e.on_failure === 'fail' ? e.parent : `${e.parent} (${e.on_failure})`));
          const one = s.tasks.length === 1 ? s.tasks[0] : null;
          const finished = s.tasks.every((t) => ['succeeded', 'dead', 'cancelled', 'stopped'].includes(t.status));
          return h('tr', { 'data-test': 'step-row', 'data-step': s.name },
            h('td', null, s.name), h('td', null, statusBadge(s.status)), h('td', null, after.join(', ')),
            h('td', null, s.tasks.map((t, i) => [i ? ' ' : '', h('a', { href: taskHref(t.id) }, String(t.id))])),
            h('td', { class: 'n' }, one ? String(one.attempt) : ''),
            h('td', null, one ? timeEl(one.started_at) : ''),
            h('td', null, one && finished ? timeEl(one.updated_at) : ''),
            h('td', { class: 'error-cell' }, one && one.error ? one.error : ''));
        })));
    };
  }

  function notFoundPage(root) {
    root.append(pageHead('Not found'), h('p', null, 'No such page. ', h('a', { href: '#/overview' }, 'Go to the overview.')));
    return null;
  }

  // -- routing and polling

  const view = $('#view');
  const live = $('[data-test="live"]');
  let refresh = null;
  let generation = 0;
  let inflight = -1;
  let again = false;

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, '');
    const qAt = raw.indexOf('?');
    const path = qAt < 0 ? raw : raw.slice(0, qAt);
    const query = new URLSearchParams(qAt < 0 ? '' : raw.slice(qAt + 1));
    const parts = path.split('/').filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch (_) { return p; } });
    return { parts, query };
  }

  function navigate(hash) {
    if (location.hash === hash) route(true); else location.hash = hash;
  }

  function route(moveFocus) {
    generation += 1;
    const gen = generation;
    const ctx = { alive: () => gen === generation };
    const { parts, query } = parseHash();
    const section = parts[0] || 'overview';
    const rest = parts.slice(1);
    const pages = { overview: overviewPage, tasks: rest.length ? taskPage : tasksPage, batches: batchesPage,
      jobs: rest.length ? jobPage : jobsPage, workflows: rest.length ? workflowPage : workflowsPage,
      keys: keysPage, nodes: nodesPage, alerts: alertsPage };
    const page = pages[section] || notFoundPage;
    clearError();
    view.replaceChildren();
    refresh = page(view, rest, query, ctx);
    for (const a of document.querySelectorAll('nav a[data-page]')) {
      if (a.dataset.page === section) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    document.title = `${($('h2', view) || {}).textContent || 'taskmill'} · taskmill`;
    if (moveFocus) { const title = $('h2', view); if (title) title.focus(); }
    refreshNow();
  }

  async function refreshNow() {
    if (!refresh) { live.textContent = ''; return; }
    const gen = generation;
    if (inflight === gen) { again = true; return; }
    inflight = gen;
    try {
      await refresh();
      if (gen === generation) {
        clearError('poll');
        live.textContent = `live · updated ${fmtTime(new Date().toISOString()).slice(11)}`;
      }
    } catch (e) {
      if (gen === generation) {
        showError(e, 'poll');
        live.textContent = 'live · last refresh failed';
      }
    } finally {
      if (inflight === gen) inflight = -1;
      if (again && gen === generation) { again = false; refreshNow(); }
    }
  }

  // Polls pause while the user is typing in a field, a dialog is open or the
  // token is asked for: nothing then is rewritten under them.
  function pausedBecause() {
    if (dialog.open) return 'a dialog is open';
    if (!tokenPanel.hidden) return 'waiting for the API token';
    const a = document.activeElement;
    if (a && view.contains(a) && a.matches('input, textarea, select')) return 'you are editing';
    if (document.hidden) return 'the tab is hidden';
    return null;
  }

  setInterval(() => {
    if (!refresh) return;
    const why = pausedBecause();
    if (why) { live.textContent = `paused while ${why}`; return; }
    refreshNow();
  }, POLL_MS);

  // For tests and the curious: the pure helpers.
  window.taskmillConsole = { describeSchedule, inputToRfc3339, refreshNow };

  window.addEventListener('hashchange', () => route(true));
  if (!location.hash) history.replaceState(null, '', '#/overview');
  route(false);
})();
