// Shared page behaviour: the layout (menu, language switch, sign-out), messages, tables and
// small DOM helpers.
import { api, APIError } from './api.js';
import { boot, t } from './boot.js';

// h builds an element: h('td', {class: 'x'}, 'text', child).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const flashEl = () => document.getElementById('flash');

// flash shows a message in the page's live region (read out by screen readers).
export function flash(message, kind = 'ok') {
  const el = flashEl();
  el.className = `flash ${kind}`;
  el.textContent = message;
}

export function clearFlash() {
  const el = flashEl();
  el.className = 'flash';
  el.textContent = '';
}

// problemMessage turns an API error into a sentence in the page's language: a known code has
// its own message (error.<code>, forms.problem.<code>), field errors their translated codes,
// anything else a generic one with the API's (English) detail.
export function problemMessage(err) {
  if (!(err instanceof APIError)) return t('error.generic', { detail: String(err) });
  const p = err.problem || {};
  if (p.code === 'validation_failed' && Array.isArray(p.errors) && p.errors.length) {
    return t('error.validation', { detail: p.errors.map((e) => `${e.field}: ${fieldMessage(e)}`).join('; ') });
  }
  const known = p.code && (boot.messages['error.' + p.code] || boot.messages['forms.problem.' + p.code]);
  if (known) return known;
  return t('error.generic', { detail: p.detail || p.title || `HTTP ${err.status}` });
}

// fieldMessage is the translated text of one field error of a problem, by its code (or the
// page's own text for it, when the page knows better what went wrong).
export function fieldMessage(e) {
  return e.text || boot.messages['forms.field.' + e.code] || t('forms.field.invalid');
}

// fieldError marks one field of form with the page's own message (a check made before any
// request, or a refusal of the API that concerns that field), and says so in the live region.
export function fieldError(form, field, text) {
  markFields(form, [{ field, text }]);
  flash(t('forms.check_fields', { n: '1' }), 'error');
}

// showError shows an API error. Given the form that sent the request, each field error goes
// under its field (the control named like the API field, or listing it in data-field), which
// is marked aria-invalid and described by it, and the keyboard moves to the first one; the
// live region says how many fields to check. Errors of no field of the form stay in the
// live region, translated by their code.
export function showError(err, form) {
  const p = (err instanceof APIError && err.problem) || {};
  if (!form || !Array.isArray(p.errors) || !p.errors.length) {
    flash(problemMessage(err), 'error');
    return;
  }
  const rest = markFields(form, p.errors);
  if (rest.length) {
    flash(t('error.validation', { detail: rest.map((e) => `${e.field}: ${fieldMessage(e)}`).join('; ') }), 'error');
  } else {
    flash(t('forms.check_fields', { n: String(p.errors.length) }), 'error');
  }
}

// controlFor finds the control of an API field: its name, else a data-field that lists it
// (or a parent path of it: commission.recurring for commission.recurring.months).
function controlFor(form, field) {
  const visible = (c) => c && c.type !== 'hidden' && !c.closest('[hidden]');
  const byName = [...form.elements].find((c) => c.name === field);
  if (visible(byName)) return byName;
  for (let f = field; f; f = f.includes('.') ? f.slice(0, f.lastIndexOf('.')) : '') {
    const c = [...form.querySelectorAll('[data-field]')].find((el) => el.dataset.field.split(' ').includes(f));
    if (visible(c)) return c;
  }
  return null;
}

// clearFieldErrors removes the marks of a previous attempt.
export function clearFieldErrors(form) {
  form.querySelectorAll('.field-error').forEach((el) => el.remove());
  form.querySelectorAll('[aria-invalid]').forEach((c) => {
    c.removeAttribute('aria-invalid');
    const ids = (c.getAttribute('aria-describedby') || '').split(' ').filter((id) => id && !id.endsWith('-error'));
    if (ids.length) c.setAttribute('aria-describedby', ids.join(' '));
    else c.removeAttribute('aria-describedby');
  });
}

// markFields puts each error under its control and the focus on the first; it returns the
// errors that have no control in the form.
export function markFields(form, errors) {
  clearFieldErrors(form);
  const rest = [];
  let first = null;
  for (const e of errors) {
    const c = controlFor(form, e.field);
    if (!c) { rest.push(e); continue; }
    const id = `${c.id || c.name}-error`;
    let msg = document.getElementById(id);
    if (!msg) {
      msg = h('small', { class: 'field-error', id });
      (c.closest('.field') || c.parentElement).append(msg);
      c.setAttribute('aria-describedby', [c.getAttribute('aria-describedby'), id].filter(Boolean).join(' '));
    }
    msg.textContent = msg.textContent ? `${msg.textContent} ${fieldMessage(e)}` : fieldMessage(e);
    c.setAttribute('aria-invalid', 'true');
    first ??= c;
  }
  if (first) {
    // Inside busy() the form's controls are still disabled, and a disabled control takes no
    // focus: then it moves once they are enabled again.
    first.focus();
    if (document.activeElement !== first) setTimeout(() => first.focus(), 0);
  }
  return rest;
}

// checkRequired marks the form's empty required controls, as the API would refuse them, and
// says whether there were none.
export function checkRequired(form) {
  const empty = [...form.elements].filter((c) => c.required && !c.disabled && !c.closest('[hidden]') && !String(c.value).trim());
  if (!empty.length) { clearFieldErrors(form); return true; }
  markFields(form, empty.map((c) => ({ field: c.name, code: 'required' })));
  flash(t('forms.check_fields', { n: String(empty.length) }), 'error');
  return false;
}

// localeAmount reads an amount typed the way the page writes them ("12,50" in Spanish, "1,250.5"
// in English) as the API's decimal string ("12.50", "1250.5"): the language's decimal mark is
// the decimal point and its group separator is dropped between groups of three digits; a "."
// is taken as the decimal point too when it is not grouping. Anything else is sent as typed,
// for the API to refuse under the field.
export function localeAmount(text) {
  const parts = new Intl.NumberFormat(boot.locale, { useGrouping: true }).formatToParts(12345.6);
  const dec = parts.find((x) => x.type === 'decimal').value;
  const group = parts.find((x) => x.type === 'group')?.value || '';
  let s = String(text).replace(/[\s\u00a0\u202f]/g, '');
  const groups = (sep) => new RegExp(`^\\d{1,3}(\\${sep}\\d{3})+(\\${dec}\\d*)?$`);
  if (group && s.includes(group) && groups(group).test(s)) s = s.split(group).join('');
  if (dec !== '.' && s.includes(dec)) s = s.replace(dec, '.');
  return /^\d+(\.\d+)?$/.test(s) ? s : String(text).trim();
}

// focusRow puts the keyboard on the row of id in a table just drawn: its first button, else
// the row itself (after joining a program or creating a link, the focus is not dropped).
export function focusRow(container, id) {
  const tr = [...container.querySelectorAll('tbody tr')].find((r) => r.dataset.id === id);
  if (!tr) return;
  const button = tr.querySelector('button, a[href]');
  if (button) { button.focus(); return; }
  tr.setAttribute('tabindex', '-1');
  tr.focus();
}

// brandCurrency is the currency most of an advertiser's programs pay in ('' without
// programs): the default of its money forms, and the currency its empty figures are shown in.
export async function brandCurrency() {
  const progs = (await api.get('/api/programs', { limit: 100 })).data;
  const count = new Map();
  for (const p of progs) count.set(p.currency, (count.get(p.currency) || 0) + 1);
  const [top] = [...count].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return top ? top[0] : '';
}

// fillCurrencies offers the ISO 4217 codes of a currency select by name in the page's
// language ("USD – US dollar"), keeping chosen selected.
export function fillCurrencies(select, chosen) {
  const names = new Intl.DisplayNames([boot.locale], { type: 'currency' });
  for (const o of select.options) {
    o.textContent = `${o.value} – ${names.of(o.value)}`;
    // The default of the form, which reset() comes back to.
    o.defaultSelected = o.value === chosen;
  }
  if (chosen) select.value = chosen;
}

// table renders rows into a container, or the empty state.
export function table(container, columns, rows, { caption, empty } = {}) {
  container.replaceChildren();
  if (!rows.length) {
    container.append(h('p', { class: 'empty' }, empty || t('common.empty')));
    return;
  }
  container.append(h('table', {},
    caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)))),
    h('tbody', {}, rows.map((r) => h('tr', { dataset: { id: r.id || '' } },
      columns.map((c) => h('td', { class: c.class, 'data-label': c.label }, c.render(r))))))));
}

// rowAction runs the action of a table row: the request, then the message and the table drawn
// again (reload), with the keyboard kept in the table rather than dropped at the top of the
// page (keepFocus); a failure shows its error instead (under its field, when the action
// sent one of form).
export async function rowAction(container, id, request, message, reload, form) {
  const refocus = keepFocus(container, id);
  try {
    await request();
    flash(message);
    await reload();
    refocus();
  } catch (err) {
    showError(err, form);
  }
}

// keepFocus, called before a row's action redraws its table, returns what puts the keyboard
// back after the redraw: on the row's first button if it still has one (pause becomes
// resume), else on the next row's that has one (a decided commission leaves the pending
// ones), else the previous row's, else on the table itself.
function keepFocus(container, id) {
  const before = [...container.querySelectorAll('tbody tr')].map((tr) => tr.dataset.id);
  const at = before.indexOf(id);
  return () => {
    const button = (tr) => tr && tr.querySelector('button:not(.copy)');
    const rows = [...container.querySelectorAll('tbody tr')].filter(button);
    const pos = (tr) => before.indexOf(tr.dataset.id);
    const target = rows.find((tr) => tr.dataset.id === id)
      || rows.find((tr) => pos(tr) > at)
      || rows.filter((tr) => pos(tr) >= 0 && pos(tr) < at).pop();
    if (target) {
      button(target).focus();
      return;
    }
    const table = container.querySelector('table') || container;
    table.setAttribute('tabindex', '-1');
    table.focus();
  };
}

// copyButton copies a value to the clipboard and says so.
export function wireCopy(root = document) {
  root.addEventListener('click', async (e) => {
    const btn = e.target.closest('button.copy');
    if (!btn) return;
    const src = btn.dataset.copy ? document.querySelector(btn.dataset.copy) : null;
    const value = src ? src.value || src.textContent : btn.dataset.value;
    try {
      await navigator.clipboard.writeText(value);
      flash(t('common.copied'));
    } catch {
      if (src && src.select) src.select();
      flash(t('common.copy_failed'), 'error');
    }
  });
}

// badge shows a status; gender 'm' takes the masculine forms (forms.status_m: a programme, a
// link, a payout in Spanish), else the feminine ones of status (a commission, a partnership).
export function badge(status, gender) {
  const text = (gender === 'm' && boot.messages['forms.status_m.' + status]) || t('status.' + status);
  return h('span', { class: `badge ${status}` }, text);
}

// busy disables a form's enabled controls while a request runs, and enables them again
// after (controls that were disabled stay as the request's outcome left them).
export async function busy(form, fn) {
  const controls = [...form.querySelectorAll('button, input, select, textarea')].filter((c) => !c.disabled);
  controls.forEach((c) => { c.disabled = true; });
  form.setAttribute('aria-busy', 'true');
  try {
    return await fn();
  } finally {
    controls.forEach((c) => { c.disabled = false; });
    form.removeAttribute('aria-busy');
  }
}

function initLayout() {
  const toggle = document.querySelector('.menu-toggle');
  const nav = document.getElementById('nav');
  if (toggle && nav) {
    toggle.addEventListener('click', () => {
      const open = toggle.getAttribute('aria-expanded') !== 'true';
      toggle.setAttribute('aria-expanded', String(open));
      nav.classList.toggle('open', open);
    });
  }
  // Signed in, the language is saved with the account before the page reloads in it.
  document.querySelectorAll('.langs a[data-locale]').forEach((a) => {
    a.addEventListener('click', async (e) => {
      if (!boot.kind) return;
      e.preventDefault();
      try {
        await api.put('/api/account/locale', { locale: a.dataset.locale });
      } catch (err) {
        showError(err);
        return;
      }
      location.assign(a.href);
    });
  });
  // A download is a plain GET that the browser streams to disk: the session is checked first
  // (and refreshed when its access token expired while the page was open), or the file would
  // be the API's 401 problem.
  document.querySelectorAll('a[download]').forEach((a) => {
    a.addEventListener('click', async (e) => {
      if (a.dataset.checked) { delete a.dataset.checked; return; }
      e.preventDefault();
      try { await api.get('/api/auth/me'); } catch (err) { showError(err); return; }
      a.dataset.checked = 'yes';
      a.click();
    });
  });
  const logout = document.getElementById('logout');
  if (logout) {
    logout.addEventListener('click', async () => {
      try { await api.post('/api/auth/logout'); } catch { /* signed out either way */ }
      location.assign('/login');
    });
  }
  wireCopy();
}

initLayout();
