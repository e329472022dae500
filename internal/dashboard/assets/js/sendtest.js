// "Send test" of a webhook or of the postback URL: one sample delivery, signed as a real one,
// sent once, and what the receiver answered shown in the flash area.
import { api } from './api.js';
import { t } from './boot.js';
import { flash, showError } from './ui.js';

export async function sendTest(target) {
  try {
    const r = await api.post('/api/webhooks/test', { ...target, send: true });
    const s = r.sent;
    if (s.success) {
      flash(t('sendtest.ok', { status: s.status_code, ms: s.duration_ms }));
    } else if (s.status_code) {
      flash(t('sendtest.refused', { status: s.status_code }), 'error');
    } else {
      flash(t('sendtest.failed', { error: s.error }), 'error');
    }
  } catch (err) {
    showError(err);
  }
}
