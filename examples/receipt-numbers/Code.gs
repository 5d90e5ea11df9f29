/**
 * Seed 000 — receipt numbers for form responses, from several executions at once.
 *
 * Before: every execution read "last receipt number" from a Script Property, added 1 and wrote it
 * back inside LockService; a lost property restarted at 0 and re-issued R-0001, and an execution
 * that died after saving left the caller without its number.
 * Now: ichido issues the number. The key names the form response, so a re-run of the trigger, a
 * retry after a lost answer or a colleague running it again all get the same number; a counter
 * that does not exist is an error (counter_not_found), never a silent restart from 0.
 *
 * Setup (once):
 *   - an admin creates the counter:
 *       ichido counter create receipts --ns forms --max 9999 --format 'R-{seq:4}' --require-key
 *   - Script Properties: ICHIDO_URL (https://…), ICHIDO_TOKEN (a writer token of namespace forms),
 *     ICHIDO_NS = forms
 *   - add Ichido.gs to the project (paste it, or add the library with the identifier "Ichido":
 *     connect() below passes this project's Script Properties, which a library cannot read itself)
 *   - an installable trigger calling onFormSubmit: event source "From form", "On form submit"
 *     (a trigger of the responses' spreadsheet instead: README, recipe gas/receipt-number-sheet)
 */

function connect() {
  return Ichido.connect({ properties: PropertiesService.getScriptProperties() });
}

/** The trigger: numbers the response and mails the number to the respondent, once. */
function onFormSubmit(e) {
  var ichido = connect();
  var responseId = e.response.getId();
  var receipt = ichido.nextNumber('receipts', 'form-' + responseId);
  // Write receipt.formatted next to the response here (a re-run writes the same number again).
  ichido.once('receipt-mail-' + responseId, function () {
    MailApp.sendEmail(
      e.response.getRespondentEmail(),
      '受付番号 ' + receipt.formatted,
      'お申し込みを受け付けました。受付番号は ' + receipt.formatted + ' です。'
    );
    return { mailed: receipt.formatted };
  }, { leaseMs: 60000, waitMs: 20000 });
  return receipt.formatted;
}

/**
 * The seed's own example kept as it was — a number in a Script Property — with ichido's lock in
 * place of LockService (the same lock then also guards a VBA macro or a cron job) and the seed's
 * guards: a missing or malformed stored number stops the script instead of restarting at 0.
 */
function issuePracticeNumber() {
  return connect().withLock('practice.lastNumber', function () {
    var store = PropertiesService.getScriptProperties();
    var raw = store.getProperty('practice.lastNumber');
    if (raw === null || !/^(0|[1-9]\d*)$/.test(raw)) {
      throw new Error('最後の受付番号を確認してください');
    }
    var current = Number(raw);
    if (!Number.isSafeInteger(current) || current < 0 || current >= 9999) {
      throw new Error('受付番号の上限を確認してください');
    }
    var next = current + 1;
    store.setProperty('practice.lastNumber', String(next));
    return 'R-' + String(next).padStart(4, '0');
  }, { waitMs: 10000, leaseMs: 30000 });
}
