import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { clearFlash, flash, h, rowAction, table } from '../ui.js';
import { canManage, invitationStatus, showPeopleError, wireInviteForm } from '../people.js';

const form = document.getElementById('invite-form');
const members = document.getElementById('members');
const invitations = document.getElementById('invitations');
const isOwner = boot.role === 'owner';
const roles = ['owner', 'admin', 'member'];

// Only owners grant or take away the owner role (the API enforces it).
function roleCell(m) {
  if (!canManage || (!isOwner && m.role === 'owner')) return t('team.role_' + m.role);
  return h('select', { 'aria-label': t('team.role_of', { email: m.email }), onchange: (e) => setRole(m, e.target) },
    roles.filter((r) => isOwner || r !== 'owner').map((r) => h('option', { value: r, selected: r === m.role }, t('team.role_' + r))));
}

async function loadMembers() {
  try {
    const page = await api.get('/api/team/members');
    table(members, [
      { label: t('team.name'), render: (m) => h('div', {}, m.name || '–', h('br'), h('small', { class: 'muted' }, m.email)) },
      { label: t('team.role'), render: roleCell },
      { label: t('team.joined'), render: (m) => fmt.dateTime(m.created_at) },
      { label: t('team.last_login'), render: (m) => (m.last_login_at ? fmt.dateTime(m.last_login_at) : t('team.never')) },
      canManage && { label: t('common.actions'), render: (m) => ((isOwner || m.role !== 'owner') ? h('button', { type: 'button', class: 'danger',
        onclick: () => remove(m), 'aria-label': t('team.remove_named', { email: m.email }) }, t('team.remove')) : '') },
    ].filter(Boolean), page.data, { caption: t('team.members_title') });
  } catch (err) {
    showPeopleError(err);
  }
}

async function loadInvitations() {
  try {
    const page = await api.get('/api/team/invitations');
    table(invitations, [
      { label: t('team.email'), class: 'mono', render: (i) => i.email },
      { label: t('team.role'), render: (i) => t('team.role_' + i.role) },
      { label: t('common.status'), render: (i) => invitationStatus(i.status) },
      { label: t('team.expires'), render: (i) => fmt.dateTime(i.expires_at) },
      canManage && { label: t('common.actions'), render: (i) => h('button', { type: 'button', class: 'danger',
        onclick: () => revoke(i), 'aria-label': t('team.revoke_named', { email: i.email }) }, t('team.revoke')) },
    ].filter(Boolean), page.data, { caption: t('team.invitations_title'), empty: t('team.invitations_empty') });
  } catch (err) {
    showPeopleError(err);
  }
}

async function setRole(m, select) {
  clearFlash();
  try {
    const updated = await api.patch(`/api/team/members/${encodeURIComponent(m.id)}`, { role: select.value });
    flash(t('team.role_changed', { email: m.email, role: t('team.role_' + updated.role) }));
  } catch (err) {
    select.value = m.role;
    showPeopleError(err);
    select.focus();
    return;
  }
  await loadMembers();
  const again = members.querySelector(`tr[data-id="${CSS.escape(m.id)}"] select`);
  if (again) again.focus();
}

async function remove(m) {
  if (!confirm(t('team.remove_confirm', { email: m.email }))) return;
  await rowAction(members, m.id, () => api.del(`/api/team/members/${encodeURIComponent(m.id)}`),
    t('team.removed', { email: m.email }), loadMembers);
}

async function revoke(i) {
  if (!confirm(t('team.revoke_confirm', { email: i.email }))) return;
  await rowAction(invitations, i.id, () => api.del(`/api/team/invitations/${encodeURIComponent(i.id)}`),
    t('team.revoked', { email: i.email }), loadInvitations);
}

wireInviteForm(form, (email) => api.post('/api/team/invitations', { email, role: form.role.value, locale: boot.locale }),
  (inv) => t('team.invited', { email: inv.email }), loadInvitations);

document.querySelectorAll('[data-managers-only]').forEach((el) => { if (!canManage) el.hidden = true; });
document.querySelectorAll('[data-owners-only]').forEach((el) => { if (!isOwner) el.remove(); });
loadMembers();
loadInvitations();
