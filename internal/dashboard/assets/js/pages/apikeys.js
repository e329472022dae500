import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { busy, clearFlash, fieldError, flash, h, rowAction, showError, table } from '../ui.js';

const form = document.getElementById('create-form');
const list = document.getElementById('keys');
const newKey = document.getElementById('new-key');
const canManage = boot.role === 'owner' || boot.role === 'admin';

async function load() {
  try {
    const keys = [];
    let cursor = '';
    do {
      const page = await api.get('/api/api-keys', { limit: 100, cursor });
      keys.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor);
    table(list, [
      { label: t('apikeys.name'), render: (k) => k.name },
      { label: t('apikeys.prefix'), class: 'mono', render: (k) => k.prefix + '…' },
      { label: t('common.created'), render: (k) => fmt.dateTime(k.created_at) },
      { label: t('apikeys.last_used'), render: (k) => (k.last_used_at ? fmt.dateTime(k.last_used_at) : t('apikeys.never_used')) },
      { label: t('common.actions'), render: (k) => (canManage ? h('button', { type: 'button', class: 'danger', onclick: () => revoke(k), 'aria-label': t('apikeys.revoke_named', { name: k.name }) }, t('apikeys.revoke')) : '') },
    ], keys, { caption: t('apikeys.list_title'), empty: t('apikeys.empty') });
  } catch (err) {
    showError(err);
  }
}

async function revoke(k) {
  if (!confirm(t('apikeys.revoke_confirm', { name: k.name }))) return;
  await rowAction(list, k.id, () => api.del(`/api/api-keys/${encodeURIComponent(k.id)}`),
    t('apikeys.revoked', { name: k.name }), load);
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  const name = form.name.value.trim();
  if (!name) {
    fieldError(form, 'name', t('apikeys.name_required'));
    return;
  }
  await busy(form, async () => {
    try {
      const k = await api.post('/api/api-keys', { name });
      document.getElementById('new-key-value').value = k.key;
      newKey.hidden = false;
      form.reset();
      flash(t('apikeys.created', { name: k.name }));
      document.getElementById('new-key-value').focus();
      await load();
    } catch (err) {
      showError(err, form);
    }
  });
});

if (!canManage) form.closest('section').hidden = true;
load();
