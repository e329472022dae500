import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { badge, clearFlash, h, rowAction, showError, table } from '../ui.js';

const advertiser = boot.kind === 'advertiser';
const canDecide = advertiser && boot.role !== 'member';
const form = document.getElementById('filter-form');
const container = document.getElementById('partnerships');
let names = new Map();

async function load() {
  try {
    if (!names.size) {
      const progs = await api.get('/api/programs', { limit: 100 });
      names = new Map(progs.data.map((p) => [p.id, p.name]));
    }
    const page = await api.get('/api/partnerships', { status: form.status.value, limit: 100 });
    const columns = [
      { label: t('partnerships.program'), render: (p) => names.get(p.program_id) || p.program_id },
      advertiser && { label: t('partnerships.affiliate'), class: 'mono', render: (p) => p.affiliate_id },
      { label: t('partnerships.message'), render: (p) => p.message || '–' },
      { label: t('common.created'), render: (p) => fmt.dateTime(p.created_at) },
      { label: t('common.status'), render: (p) => badge(p.status) },
      canDecide && { label: t('common.actions'), render: (p) => h('div', { class: 'row' },
        p.status === 'pending' && h('button', { type: 'button', onclick: () => act(p, 'approve') }, t('partnerships.approve')),
        p.status === 'pending' && h('button', { type: 'button', class: 'danger', onclick: () => act(p, 'reject') }, t('partnerships.reject')),
        p.status === 'approved' && h('button', { type: 'button', class: 'danger', onclick: () => act(p, 'suspend') }, t('partnerships.suspend'))) },
    ].filter(Boolean);
    table(container, columns, page.data, { caption: t('page.partnerships.title'), empty: t('partnerships.empty') });
  } catch (err) {
    showError(err);
  }
}

async function act(p, action) {
  clearFlash();
  if (action !== 'approve' && !confirm(t('partnerships.confirm_' + action))) return;
  await rowAction(container, p.id, () => api.post(`/api/partnerships/${encodeURIComponent(p.id)}/${action}`),
    t('partnerships.done_' + action), load);
}

form.addEventListener('submit', (e) => { e.preventDefault(); clearFlash(); load(); });
load();
