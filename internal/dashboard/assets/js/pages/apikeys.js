import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { busy, clearFlash, fieldError, flash, h, rowAction, showError, table } from '../ui.js';

const form = document.getElementById('create-form');
const list = document.getElementById('keys');
const newKey = document.getElementById('new-key');
const canManage = boot.role === 'owner' || boot.role === 'admin';
// Advertisers also make publishable keys: one program's, for its tracking script.
const advertiser = boot.kind === 'advertiser';
const kindField = document.getElementById('key-kind-field');
const programField = document.getElementById('key-program-field');
const programNames = new Map();

async function loadPrograms() {
  try {
    const progs = (await api.get('/api/programs', { limit: 100 })).data;
    const select = form.program_id;
    select.replaceChildren(...progs.map((p) => h('option', { value: p.id }, p.name)));
    for (const p of progs) programNames.set(p.id, p.name);
  } catch (err) {
    showError(err);
  }
}

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
      { label: t('apikeys.publishable.kind'), render: (k) => (k.kind === 'publishable'
        ? t('apikeys.publishable.for_program', { program: programNames.get(k.program_id) || k.program_id })
        : t('apikeys.publishable.kind_secret')) },
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
  const body = { name };
  if (advertiser && form.kind.value === 'publishable') {
    if (!form.program_id.value) {
      fieldError(form, 'program_id', t('apikeys.publishable.program_required'));
      return;
    }
    Object.assign(body, { kind: 'publishable', program_id: form.program_id.value });
  }
  await busy(form, async () => {
    try {
      const k = await api.post('/api/api-keys', body);
      document.getElementById('new-key-value').value = k.key;
      const snippet = document.getElementById('new-key-snippet');
      snippet.hidden = k.kind !== 'publishable';
      document.getElementById('new-key-script').value = k.kind === 'publishable'
        ? `<script async src="${location.origin}/t.js?key=${encodeURIComponent(k.key)}"></script>` : '';
      newKey.hidden = false;
      form.reset();
      programField.hidden = true;
      flash(t('apikeys.created', { name: k.name }));
      document.getElementById('new-key-value').focus();
      await load();
    } catch (err) {
      showError(err, form);
    }
  });
});

if (!canManage) form.closest('section').hidden = true;
if (advertiser) {
  kindField.hidden = false;
  form.kind.addEventListener('change', () => { programField.hidden = form.kind.value !== 'publishable'; });
  // The list names each publishable key's program.
  loadPrograms().then(load);
} else {
  load();
}
