import { api, refreshSession } from '../api.js';
import { boot, t } from '../boot.js';
import { busy, clearFieldErrors, clearFlash, fieldError, flash, problemMessage, showError } from '../ui.js';

const requestForm = document.getElementById('request-form');
const verifyForm = document.getElementById('verify-form');
const params = new URLSearchParams(location.search);
let signup = params.get('signup') === '1';

const heading = document.querySelector('h1');

function setMode(isSignup) {
  signup = isSignup;
  // The page says what it does: signing in, or creating an account.
  heading.textContent = t(signup ? 'forms.signup_title' : 'page.login.title');
  document.title = `${heading.textContent} · PartnerStream`;
  document.querySelectorAll('.signup-only').forEach((el) => { el.hidden = !signup; });
  document.querySelectorAll('[data-mode-text]').forEach((el) => { el.hidden = el.dataset.modeText !== (signup ? 'signup' : 'login'); });
  document.getElementById('company_name').required = signup;
}

function showStep(verify) {
  requestForm.hidden = verify;
  verifyForm.hidden = !verify;
  (verify ? document.getElementById('code') : document.getElementById('email')).focus();
}

function registration() {
  if (!signup) return {};
  const data = new FormData(requestForm);
  return { company_kind: data.get('company_kind'), company_name: data.get('company_name').trim(), name: data.get('name').trim() };
}

requestForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  const email = requestForm.email.value.trim();
  if (!requestForm.email.checkValidity() || !email) {
    fieldError(requestForm, 'email', t('login.email_invalid'));
    return;
  }
  if (signup && !registration().company_name) {
    fieldError(requestForm, 'company_name', t('login.company_name_required'));
    return;
  }
  clearFieldErrors(requestForm);
  await busy(requestForm, async () => {
    try {
      await api.post('/api/auth/magic-code', { email, locale: boot.locale });
      // Said once: the code field is described by the sentence, which a screen reader reads
      // as the focus lands on it.
      document.getElementById('code-sent').textContent = t('login.code_sent', { email });
      showStep(true);
    } catch (err) {
      showError(err, requestForm);
    }
  });
});

verifyForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  const code = verifyForm.code.value.trim();
  if (!/^[0-9]{6}$/.test(code)) {
    fieldError(verifyForm, 'code', t('login.code_invalid'));
    return;
  }
  clearFieldErrors(verifyForm);
  await busy(verifyForm, async () => {
    try {
      await api.post('/api/auth/magic-code/verify', { email: requestForm.email.value.trim(), code, locale: boot.locale, ...registration() });
      location.assign(boot.next || '/app');
    } catch (err) {
      if (err.problem && err.problem.code === 'registration_required') {
        // The code is spent: the visitor fills in the company and asks for a new one.
        setMode(true);
        showStep(false);
        fieldError(requestForm, 'company_name', t('login.registration_required'));
        return;
      }
      const code = err.problem && err.problem.code;
      if (code === 'invalid_code' || code === 'code_locked') {
        // The code's own refusal goes under the code, ready to be typed again.
        fieldError(verifyForm, 'code', problemMessage(err));
        verifyForm.code.select();
        return;
      }
      if (err.problem && Array.isArray(err.problem.errors) && err.problem.errors.some((e) => requestForm.elements[e.field])) {
        // The company's name and the person's are asked with the address: back there.
        showStep(false);
        showError(err, requestForm);
        return;
      }
      showError(err, verifyForm);
      verifyForm.code.select();
    }
  });
});

document.getElementById('restart').addEventListener('click', () => {
  verifyForm.reset();
  clearFlash();
  showStep(false);
});

for (const [id, mode] of [['to-signup', true], ['to-login', false]]) {
  document.getElementById(id).addEventListener('click', (e) => {
    e.preventDefault();
    setMode(mode);
    clearFlash();
  });
}

// Sign-up through a provider carries the company details along.
document.querySelectorAll('a.oauth').forEach((a) => {
  a.addEventListener('click', (e) => {
    const q = new URLSearchParams({ return_to: boot.next || '/app', locale: boot.locale });
    if (signup) {
      const reg = registration();
      if (!reg.company_name) {
        e.preventDefault();
        fieldError(requestForm, 'company_name', t('login.company_name_required'));
        return;
      }
      q.set('company_kind', reg.company_kind);
      q.set('company_name', reg.company_name);
    }
    a.href = `/api/auth/oauth/${a.dataset.provider}/start?${q}`;
  });
});

const oauthError = params.get('error');
if (oauthError) flash(boot.messages['error.' + oauthError] || t('error.oauth_failed'), 'error');

setMode(signup);

// A session whose access token expired comes back here: the refresh cookie only travels to
// /api/auth, so the renewal happens from this page.
if (document.cookie.includes('ps_csrf=') && !oauthError) {
  refreshSession().then((ok) => { if (ok) location.replace(boot.next || '/app'); });
}
