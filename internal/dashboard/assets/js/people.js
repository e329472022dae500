// People: what the team page and the programs page share (the messages of the people
// API's refusals), and the invitations of affiliates to programs on the programs page.
import { api } from './api.js';
import { boot, fmt, t } from './boot.js';
import { busy, clearFieldErrors, clearFlash, fieldError, flash, h, rowAction, showError, table } from './ui.js';

// The people API's refusal codes with a message of their own.
const peopleCodes = ['last_owner', 'already_member', 'email_has_account', 'email_not_sent', 'partnership_decided'];

// The refusals that are about the address typed in an invitation form.
const emailCodes = ['already_member', 'email_has_account'];

// showPeopleError shows a refusal of the people API; given the invitation form that sent
// it, a refusal of the address goes under the address.
export function showPeopleError(err, form) {
  const code = err && err.problem && err.problem.code;
  if (form && emailCodes.includes(code)) fieldError(form, 'email', t('people.error_' + code));
  else if (peopleCodes.includes(code)) flash(t('people.error_' + code), 'error');
  else showError(err, form);
}

export const canManage = boot.role === 'owner' || boot.role === 'admin';

// invitationStatus shows an open invitation's status (an invitation is feminine in Spanish,
// so it has its own words rather than the shared status badges).
export function invitationStatus(status) {
  return h('span', { class: `badge ${status === 'expired' ? 'rejected' : 'pending'}` }, t('team.status_' + status));
}

// wireInviteForm makes a form with an email field send an invitation (send posts it and
// returns the invitation), say so and redraw the invitations (reload); the keyboard stays
// in the form for the next address.
export function wireInviteForm(inviteForm, send, sent, reload) {
  inviteForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFlash();
    const email = inviteForm.email.value.trim();
    if (!email) {
      fieldError(inviteForm, 'email', t('team.email_required'));
      return;
    }
    clearFieldErrors(inviteForm);
    await busy(inviteForm, async () => {
      try {
        const inv = await send(email);
        inviteForm.reset();
        flash(sent(inv));
        await reload();
      } catch (err) {
        showPeopleError(err, inviteForm);
      }
    });
    inviteForm.email.focus();
  });
}

// Brand side: the invite form and the pending invitations of one program.
const section = document.getElementById('invite-affiliate-section');
const form = document.getElementById('invite-affiliate-form');
const pending = document.getElementById('affiliate-invitations');
let shown = null;

export async function showAffiliateInvitations(program) {
  shown = program;
  section.hidden = false;
  document.getElementById('invite-affiliate-of').textContent = program.name;
  form.hidden = !canManage;
  await loadProgramInvitations();
  (canManage ? form.email : document.getElementById('invite-affiliate-title')).focus();
}

async function loadProgramInvitations() {
  try {
    const page = await api.get(`/api/programs/${encodeURIComponent(shown.id)}/invitations`);
    table(pending, [
      { label: t('team.email'), class: 'mono', render: (i) => i.email },
      { label: t('common.status'), render: (i) => invitationStatus(i.status) },
      { label: t('team.expires'), render: (i) => fmt.dateTime(i.expires_at) },
      canManage && { label: t('common.actions'), render: (i) => h('button', { type: 'button', class: 'danger',
        onclick: () => revokeAffiliate(i), 'aria-label': t('affiliate_invitations.revoke_named', { email: i.email }) }, t('team.revoke')) },
    ].filter(Boolean), page.data, { caption: t('affiliate_invitations.pending_title'), empty: t('affiliate_invitations.empty') });
  } catch (err) {
    showPeopleError(err);
  }
}

async function revokeAffiliate(i) {
  if (!confirm(t('team.revoke_confirm', { email: i.email }))) return;
  await rowAction(pending, i.id, () => api.del(`/api/affiliate-invitations/${encodeURIComponent(i.id)}`),
    t('affiliate_invitations.revoked', { email: i.email }), loadProgramInvitations);
}

if (form) {
  wireInviteForm(form, (email) => api.post(`/api/programs/${encodeURIComponent(shown.id)}/invitations`, { email, locale: boot.locale }),
    (inv) => t('affiliate_invitations.sent', { email: inv.email }), loadProgramInvitations);
}

// Affiliate side: the invitations addressed to the signed-in user, each with Accept.
const mine = document.getElementById('my-invitations');

export async function loadMyInvitations(onAccepted) {
  if (!mine) return;
  let list;
  try {
    list = (await api.get('/api/affiliate-invitations')).data;
  } catch (err) {
    showPeopleError(err);
    return;
  }
  mine.closest('section').hidden = list.length === 0;
  table(mine, [
    { label: t('affiliate_invitations.program'), render: (i) => i.program_name },
    { label: t('affiliate_invitations.brand'), render: (i) => i.advertiser_name },
    { label: t('team.expires'), render: (i) => fmt.dateTime(i.expires_at) },
    canManage && { label: t('common.actions'), render: (i) => h('button', { type: 'button', class: 'primary',
      onclick: () => accept(i, onAccepted), 'aria-label': t('affiliate_invitations.accept_named', { name: i.program_name }) }, t('affiliate_invitations.accept')) },
  ].filter(Boolean), list, { caption: t('affiliate_invitations.mine_title') });
}

async function accept(i, onAccepted) {
  clearFlash();
  try {
    await api.post(`/api/affiliate-invitations/${encodeURIComponent(i.id)}/accept`);
    flash(t('affiliate_invitations.accepted', { name: i.program_name }));
    await loadMyInvitations(onAccepted);
    await onAccepted();
    // The accepted row is gone: the keyboard goes to the programs, where the partnership shows.
    const title = document.getElementById('programs-title');
    title.setAttribute('tabindex', '-1');
    title.focus();
  } catch (err) {
    showPeopleError(err);
  }
}
