import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { deliveryTable, healthPanel } from '../deliveries.js';
import { sendTest } from '../sendtest.js';
import { badge, busy, clearFlash, flash, h, rowAction, showError, table } from '../ui.js';

const form = document.getElementById('hook-form');
const list = document.getElementById('hooks');
const secretBox = document.getElementById('hook-secret');
const deliveriesSection = document.getElementById('deliveries-section');
const canManage = boot.role === 'owner' || boot.role === 'admin';
let hooks = [];
let shownHook = null;

function setMode(edit) {
  document.querySelectorAll('[data-form-mode]').forEach((el) => { el.hidden = el.dataset.formMode !== (edit ? 'edit' : 'create'); });
}

function showSecret(secret) {
  document.getElementById('hook-secret-value').value = secret;
  secretBox.hidden = false;
  document.getElementById('hook-secret-value').focus();
}

async function load() {
  try {
    hooks = (await api.get('/api/webhooks', { limit: 100 })).data;
  } catch (err) {
    showError(err);
    list.replaceChildren(h('p', { class: 'empty' }, t('webhooks.unavailable')));
    return;
  }
  table(list, [
    { label: t('webhooks.url'), class: 'mono', render: (w) => w.url },
    { label: t('webhooks.events'), render: (w) => w.events.join(', ') },
    { label: t('common.status'), render: (w) => (w.suspended ? badge('suspended', 'm') : w.ready ? badge('active', 'm') : badge('pending', 'm')) },
    { label: t('webhooks.rotated'), render: (w) => fmt.dateTime(w.secret_rotated_at) },
    { label: t('common.actions'), render: (w) => h('div', { class: 'row' },
      h('button', { type: 'button', onclick: () => showDeliveries(w), 'aria-label': t('webhooks.history_of', { url: w.url }) }, t('webhooks.history')),
      canManage && w.ready && h('button', { type: 'button', onclick: () => { clearFlash(); sendTest({ webhook_id: w.id }); }, 'aria-label': t('sendtest.send_of', { url: w.url }) }, t('sendtest.send')),
      canManage && h('button', { type: 'button', onclick: () => edit(w), 'aria-label': t('webhooks.edit_of', { url: w.url }) }, t('common.edit')),
      canManage && h('button', { type: 'button', onclick: () => rotate(w), 'aria-label': t('webhooks.rotate_of', { url: w.url }) }, t('webhooks.rotate')),
      canManage && h('button', { type: 'button', class: 'danger', onclick: () => remove(w), 'aria-label': t('webhooks.delete_of', { url: w.url }) }, t('common.delete'))) },
  ], hooks, { caption: t('webhooks.list_title'), empty: t('webhooks.empty') });
}

function edit(w) {
  clearFlash();
  form.id.value = w.id;
  form.url.value = w.url;
  form.description.value = w.description || '';
  form.suspended.checked = w.suspended;
  form.querySelectorAll('input[name=events]').forEach((c) => { c.checked = w.events.includes(c.value); });
  setMode(true);
  secretBox.hidden = true;
  form.url.focus();
}

function resetForm() {
  form.reset();
  form.id.value = '';
  setMode(false);
}

async function rotate(w) {
  if (!confirm(t('webhooks.rotate_confirm', { url: w.url }))) return;
  try {
    const r = await api.put(`/api/webhooks/${encodeURIComponent(w.id)}/rotate-secret`, {});
    showSecret(r.secret);
    flash(t('webhooks.rotated_done', { date: fmt.dateTime(r.previous_secret_expires_at) }));
    await load();
  } catch (err) {
    showError(err);
  }
}

async function remove(w) {
  if (!confirm(t('webhooks.delete_confirm', { url: w.url }))) return;
  await rowAction(list, w.id, async () => {
    await api.del(`/api/webhooks/${encodeURIComponent(w.id)}`);
    if (shownHook && shownHook.id === w.id) deliveriesSection.hidden = true;
  }, t('webhooks.deleted'), load);
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  const events = [...form.querySelectorAll('input[name=events]:checked')].map((c) => c.value);
  const url = form.url.value.trim();
  if (!url) { flash(t('webhooks.url_required'), 'error'); form.url.focus(); return; }
  if (!events.length) { flash(t('webhooks.events_required'), 'error'); form.querySelector('input[name=events]').focus(); return; }
  const body = { url, events, description: form.description.value.trim(), suspended: form.suspended.checked };
  await busy(form, async () => {
    try {
      if (form.id.value) {
        await api.patch(`/api/webhooks/${encodeURIComponent(form.id.value)}`, body);
        flash(t('webhooks.saved'));
        secretBox.hidden = true;
      } else {
        const w = await api.post('/api/webhooks', body);
        showSecret(w.secret);
        flash(t('webhooks.created'));
      }
      resetForm();
      await load();
    } catch (err) {
      showError(err, form);
    }
  });
});

document.getElementById('hook-cancel').addEventListener('click', () => { resetForm(); clearFlash(); });

async function showDeliveries(w) {
  shownHook = w;
  deliveriesSection.hidden = false;
  document.getElementById('deliveries-of').textContent = w.url;
  const container = document.getElementById('deliveries');
  try {
    const page = await api.get(`/api/webhooks/${encodeURIComponent(w.id)}/deliveries`, { limit: 50 });
    const e = page.endpoint;
    healthPanel(document.getElementById('deliveries-health'), e, canManage, {
      disabled: w.suspended && e.breaker === 'disabled',
      enable: async () => {
        try {
          const resumed = await api.patch(`/api/webhooks/${encodeURIComponent(w.id)}`, { suspended: false });
          flash(t('health.enabled'));
          await load();
          await showDeliveries({ ...w, ...resumed, suspended: false });
        } catch (err) {
          showError(err);
        }
      },
      replay: async () => {
        try {
          const r = await api.post('/api/webhooks/retry-failed', { webhook_id: w.id, from: e.failing_since });
          flash(t('deliveries.queued', { n: fmt.number(r.queued) }));
          await showDeliveries(w);
        } catch (err) {
          showError(err);
        }
      },
    });
    deliveryTable(container, page.data, canManage, async (d) => {
      try {
        await api.post(`/api/webhooks/${encodeURIComponent(d.id)}/replay`);
        flash(t('deliveries.replayed'));
        await showDeliveries(w);
      } catch (err) {
        showError(err);
      }
    });
  } catch (err) {
    showError(err);
  }
  document.getElementById('deliveries-title').focus?.();
}

document.getElementById('retry-failed').addEventListener('click', async () => {
  if (!shownHook) return;
  try {
    const r = await api.post('/api/webhooks/retry-failed', { webhook_id: shownHook.id });
    flash(t('deliveries.queued', { n: fmt.number(r.queued) }));
    await showDeliveries(shownHook);
  } catch (err) {
    showError(err);
  }
});

if (!canManage) {
  form.closest('section').hidden = true;
  document.getElementById('retry-failed').hidden = true;
}
setMode(false);
load();
