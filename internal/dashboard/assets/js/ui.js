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
// its own message, anything else a generic one with the API's (English) detail.
export function problemMessage(err) {
  if (!(err instanceof APIError)) return t('error.generic', { detail: String(err) });
  const p = err.problem || {};
  const known = p.code && boot.messages['error.' + p.code];
  if (known) return known;
  if (p.code === 'validation_failed' && Array.isArray(p.errors) && p.errors.length) {
    return t('error.validation', { detail: p.errors.map((e) => `${e.field}: ${e.message}`).join('; ') });
  }
  return t('error.generic', { detail: p.detail || p.title || `HTTP ${err.status}` });
}

export function showError(err) {
  flash(problemMessage(err), 'error');
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
// page (keepFocus); a failure shows its error instead.
export async function rowAction(container, id, request, message, reload) {
  const refocus = keepFocus(container, id);
  try {
    await request();
    flash(message);
    await reload();
    refocus();
  } catch (err) {
    showError(err);
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

export function badge(status) {
  return h('span', { class: `badge ${status}` }, t('status.' + status));
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
