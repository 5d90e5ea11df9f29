// English and Japanese texts of the dashboard. t('key', {n: 3}) fills {n}. The choice is kept in
// localStorage (it is not a secret); the first visit follows the browser's language. The Japanese
// words are those of the 用語集 in README.ja.md (tests/docs/test_ja_docs.py checks the words to
// avoid).
const en = {
  'skip': 'Skip to content',
  'nav.overview': 'Overview', 'nav.counters': 'Counters', 'nav.once': 'Once records',
  'nav.locks': 'Locks', 'nav.tokens': 'Tokens', 'nav.audit': 'Audit log',
  'ns': 'Namespace', 'signout': 'Sign out', 'cancel': 'Cancel', 'lang': '日本語',
  'signin.title': 'Sign in to ichido',
  'signin.help': 'Paste an API token. It is kept in this browser tab only (sessionStorage) and sent with every call; closing the tab forgets it.',
  'signin.token': 'Token', 'signin.submit': 'Sign in',
  'signin.bad': 'This token was not accepted ({code}).',
  'who': '{role} · {ns}',
  'role.reader': 'reader', 'role.writer': 'writer', 'role.admin': 'admin',
  'loading': 'Loading…', 'none': 'Nothing here.', 'refresh': 'Refresh', 'more': 'Next page',
  'newer': 'Newest', 'older': 'Older', 'search': 'Search', 'clear': 'Clear',
  'error': 'Error: {message}', 'done': 'Done.', 'no_ns': 'No namespace yet: nothing has been created.',
  'unreachable': 'The server did not answer ({message}). Check the network and that ichido runs, then try again.',
  'choose_ns': 'Choose a namespace above.',
  // overview
  'ov.title': 'Overview', 'ov.live': 'Live (every 2 s)',
  'ov.rate': 'Requests / s', 'ov.batch': 'Commands per commit', 'ov.fsync': 'Commit (fsync) ms',
  'ov.waiters': 'Waiting requests', 'ov.namespaces': 'Namespaces',
  'ov.metrics_off': 'Live figures are unavailable ({message}).',
  'ov.store_failed': 'The store refused a write with an I/O error: writes are stopped until the server is restarted. Check the disk, then restart.',
  'col.ns': 'Namespace', 'col.counters': 'Counters', 'col.locks': 'Locks held',
  'col.processing': 'Processing', 'col.expired': 'Expired', 'col.pending': 'Pending',
  'col.dead': 'Dead', 'col.completed': 'Completed', 'col.oldest_expired': 'Oldest expired',
  // counters
  'c.title': 'Counters', 'c.name': 'Name', 'c.last': 'Last value', 'c.format': 'Format',
  'c.period': 'Period', 'c.current_period': 'Current period', 'c.issued': 'Issued',
  'c.voided': 'Voided', 'c.max': 'Max', 'c.trail': 'Issued numbers of {name}',
  'c.key': 'Key', 'c.value': 'Value', 'c.formatted': 'Number', 'c.note': 'Note',
  'c.issued_at': 'Issued at', 'c.void': 'Void', 'c.voided_at': 'Voided {at}: {reason}',
  'c.void_title': 'Void {formatted}?',
  'c.void_text': 'The number stays in the audit trail, marked as not used, and is never issued again.',
  'c.reason': 'Reason (required)', 'c.search_key': 'Find by key',
  'c.set_title': 'Adjust the last value (compare-and-set)',
  'c.expected': 'Expected last value', 'c.new_last': 'New last value', 'c.set': 'Set',
  'c.set_confirm': 'Set the last value of {name} from {from} to {to}?',
  'c.set_text': 'The next number issued will be {next}. This fails if someone issued a number meanwhile.',
  'c.period_label': 'Period', 'c.timezone': 'Time zone',
  'period.none': 'none', 'period.year': 'year', 'period.month': 'month', 'period.day': 'day',
  'period.fiscal_year': 'fiscal year', 'period.fiscal_year_from': 'fiscal year (from {month})',
  'c.create': 'Create a counter', 'c.create_btn': 'Create',
  'c.create_help': 'The first number issued is start + 1; numbering starts again at start + 1 in each new period, at midnight in the time zone.',
  'c.fy_start': 'Fiscal year starts in', 'c.start': 'Start (last value already used)',
  'c.require_key': 'Require a key (idempotency key)',
  'c.tz_default': 'Empty: the server default ({zone})',
  'c.created': 'Counter {name} created.', 'c.exists_same': 'Counter {name} already exists with these settings.',
  // once
  'o.title': 'Once records', 'o.key': 'Key', 'o.state': 'State', 'o.attempt': 'Attempts',
  'o.owner': 'Owner', 'o.lease': 'Lease', 'o.error': 'Last error', 'o.updated': 'Updated',
  'o.result': 'Stored result', 'o.reset': 'Reset', 'o.show': 'Show',
  'o.reset_title': 'Reset {key}?',
  'o.reset_text': 'The record is forgotten: the next begin of this key processes the item again (attempt 1).',
  'o.reset_text_completed': 'This item was completed. After a reset the next begin runs the work again: the mail is sent again, the invoice is booked again. Reset only when that is what you want.',
  'o.find': 'Find by key', 'o.not_found': 'No record with this key.',
  'o.retention_default': 'Completed and dead records are kept {days} days (the server default).',
  'o.retention_own': 'Completed and dead records are kept {days} days (this namespace\'s setting).',
  'o.retention_change': 'Change', 'o.retention_title': 'Retention of {ns}',
  'o.retention_text': 'Completed and dead records older than this are deleted in the background. Leave empty for the server default.',
  'o.retention_days': 'Days to keep', 'o.retention_set': 'Save',
  'state.processing': 'processing', 'state.expired': 'expired', 'state.pending': 'pending',
  'state.dead': 'dead', 'state.completed': 'completed',
  'state.help.expired': 'Processing, but the lease lapsed: the holder probably crashed. The next begin takes it over.',
  'state.help.dead': 'Failed too often (or with retry: false). Stays dead until reset.',
  'lease.left': '{s} s left', 'lease.lapsed': 'lapsed {s} s ago',
  // locks
  'l.title': 'Locks', 'l.name': 'Name', 'l.holder': 'Holder', 'l.token': 'Token',
  'l.lease': 'Lease', 'l.waiters': 'Waiting', 'l.force': 'Force release',
  'l.force_title': 'Force-release {name}?',
  'l.force_text': 'The holder ({owner}, token {token}) loses the lock now; the next waiter gets it. Writes the old holder makes late are refused where the fencing token is checked.',
  'l.none': 'No lock is held in this namespace.',
  // tokens
  't.title': 'Tokens', 't.create': 'Create a token', 't.role': 'Role', 't.ns': 'Namespace (* = all)',
  't.label': 'Label', 't.expires_days': 'Expires in days (empty: never)',
  't.secret': 'The new token (shown only now; copy it):', 't.copy': 'Copy', 't.copied': 'Copied.',
  't.id': 'Id', 't.created': 'Created', 't.expires': 'Expires', 't.revoked': 'Revoked',
  't.revoke': 'Revoke', 't.revoke_title': 'Revoke token {id}?',
  't.revoke_text': 'Every call with this token is refused from now on. This cannot be undone.',
  't.create_btn': 'Create', 'never': 'never',
  // audit
  'a.title': 'Audit log', 'a.actor': 'Actor (token id)', 'a.action': 'Action contains',
  'a.id': '#', 'a.at': 'At', 'a.status': 'Status', 'a.remote': 'From', 'a.detail': 'Detail',
  'a.filter': 'Filter',
};

const ja = {
  'skip': '本文へ移動',
  'nav.overview': '概要', 'nav.counters': 'カウンター', 'nav.once': 'once 記録',
  'nav.locks': 'ロック', 'nav.tokens': 'トークン', 'nav.audit': '監査ログ',
  'ns': '名前空間', 'signout': 'サインアウト', 'cancel': 'キャンセル', 'lang': 'English',
  'signin.title': 'ichido にサインイン',
  'signin.help': 'API トークンを貼り付けてください。トークンはこのタブの中だけ (sessionStorage) に保存され、各リクエストに付けて送信されます。タブを閉じると消去されます。',
  'signin.token': 'トークン', 'signin.submit': 'サインイン',
  'signin.bad': 'このトークンは使用できません ({code})。',
  'who': '{role} · {ns}',
  'role.reader': '閲覧', 'role.writer': '書き込み', 'role.admin': '管理者',
  'loading': '読み込み中…', 'none': '該当するものはありません。', 'refresh': '再読み込み',
  'more': '次のページ', 'newer': '最新', 'older': 'さらに古いもの', 'search': '検索', 'clear': 'クリア',
  'error': 'エラー: {message}', 'done': '完了しました。',
  'unreachable': 'サーバーから応答がありません ({message})。ネットワークと ichido が動いていることを確認して、もう一度お試しください。',
  'no_ns': '名前空間はまだありません (何も作成されていません)。',
  'choose_ns': '上で名前空間を選んでください。',
  'ov.title': '概要', 'ov.live': 'リアルタイム (2 秒ごと)',
  'ov.rate': 'リクエスト数 / 秒', 'ov.batch': 'コミットあたりのコマンド数', 'ov.fsync': 'コミット (fsync) ミリ秒',
  'ov.waiters': '待機中のリクエスト', 'ov.namespaces': '名前空間',
  'ov.metrics_off': 'リアルタイムの数値を取得できません ({message})。',
  'ov.store_failed': 'ストアへの書き込みが I/O エラーで失敗したため、サーバーを再起動するまで書き込みは停止しています。ディスクを確認してから再起動してください。',
  'col.ns': '名前空間', 'col.counters': 'カウンター', 'col.locks': '保持中のロック',
  'col.processing': '処理中', 'col.expired': '期限切れ', 'col.pending': '再試行待ち',
  'col.dead': '失敗 (要対応)', 'col.completed': '完了', 'col.oldest_expired': '最古の期限切れ',
  'c.title': 'カウンター', 'c.name': '名前', 'c.last': '最終番号', 'c.format': '書式',
  'c.period': '期間', 'c.current_period': '現在の期間', 'c.issued': '発行数',
  'c.voided': '欠番数', 'c.max': '上限', 'c.trail': '{name} の発行履歴',
  'c.key': 'キー', 'c.value': '番号', 'c.formatted': '表示番号', 'c.note': 'メモ',
  'c.issued_at': '発行日時', 'c.void': '欠番にする', 'c.voided_at': '欠番 ({at}): {reason}',
  'c.void_title': '{formatted} を欠番にしますか?',
  'c.void_text': 'この番号は発行履歴に「使用しない」として残り、二度と発行されません。',
  'c.reason': '理由 (必須)', 'c.search_key': 'キーで検索',
  'c.set_title': '最終番号の調整 (比較して設定)',
  'c.expected': '現在の最終番号', 'c.new_last': '新しい最終番号', 'c.set': '設定',
  'c.set_confirm': '{name} の最終番号を {from} から {to} に変更しますか?',
  'c.set_text': '次に発行される番号は {next} になります。その間に誰かが番号を発行していた場合は失敗します。',
  'c.period_label': '期間', 'c.timezone': 'タイムゾーン',
  'period.none': 'なし (通し番号)', 'period.year': '年', 'period.month': '月', 'period.day': '日',
  'period.fiscal_year': '年度', 'period.fiscal_year_from': '年度 ({month}始まり)',
  'c.create': 'カウンターの作成', 'c.create_btn': '作成',
  'c.create_help': '最初に発行される番号は「開始値 + 1」です。期間が変わるたびに、タイムゾーンの午前 0 時に「開始値 + 1」から数え直します。',
  'c.fy_start': '年度の開始月', 'c.start': '開始値 (使用済みの最後の番号)',
  'c.require_key': 'キーを必須にする (冪等キー)',
  'c.tz_default': '空欄: サーバーの既定 ({zone})',
  'c.created': 'カウンター {name} を作成しました。', 'c.exists_same': 'カウンター {name} は同じ設定ですでに存在します。',
  'o.title': 'once 記録', 'o.key': 'キー', 'o.state': '状態', 'o.attempt': '試行回数',
  'o.owner': '処理者', 'o.lease': 'リース', 'o.error': '最後のエラー', 'o.updated': '更新日時',
  'o.result': '保存された結果', 'o.reset': 'リセット', 'o.show': '表示',
  'o.reset_title': '{key} をリセットしますか?',
  'o.reset_text': 'この記録は削除され、次にこのキーで begin したときに最初から (1 回目として) 処理されます。',
  'o.reset_text_completed': 'この項目は処理が完了しています。リセットすると、次の begin で処理がもう一度実行されます (メールの再送信、請求書の二重計上など)。それが目的の場合だけリセットしてください。',
  'o.find': 'キーで検索', 'o.not_found': 'このキーの記録はありません。',
  'o.retention_default': '完了・失敗した記録は {days} 日間保存されます (サーバーの既定値)。',
  'o.retention_own': '完了・失敗した記録は {days} 日間保存されます (この名前空間の設定)。',
  'o.retention_change': '変更', 'o.retention_title': '{ns} の保存期間',
  'o.retention_text': 'これより古い完了・失敗の記録はバックグラウンドで削除されます。空欄にするとサーバーの既定値に戻ります。',
  'o.retention_days': '保存日数', 'o.retention_set': '保存',
  'state.processing': '処理中', 'state.expired': '期限切れ', 'state.pending': '再試行待ち',
  'state.dead': '失敗 (要対応)', 'state.completed': '完了',
  'state.help.expired': '処理中のままリースが切れています。処理者が異常終了した可能性があります。次の begin が引き継ぎます。',
  'state.help.dead': '失敗の回数が上限に達した (または retry: false で失敗した) 記録です。リセットするまでこのままです。',
  'lease.left': '残り {s} 秒', 'lease.lapsed': '{s} 秒前に期限切れ',
  'l.title': 'ロック', 'l.name': '名前', 'l.holder': '保持者', 'l.token': 'トークン番号',
  'l.lease': 'リース', 'l.waiters': '待機数', 'l.force': '強制解除',
  'l.force_title': '{name} を強制解除しますか?',
  'l.force_text': '保持者 ({owner}、トークン番号 {token}) は直ちにロックを失い、次に待っている処理がロックを取得します。元の保持者が遅れて行う書き込みは、フェンシングトークンを確認する側で拒否されます。',
  'l.none': 'この名前空間で保持中のロックはありません。',
  't.title': 'トークン', 't.create': 'トークンの作成', 't.role': 'ロール', 't.ns': '名前空間 (* = すべて)',
  't.label': 'ラベル', 't.expires_days': '有効日数 (空欄: 無期限)',
  't.secret': '新しいトークン (表示されるのは今回だけです。コピーしてください):', 't.copy': 'コピー', 't.copied': 'コピーしました。',
  't.id': 'ID', 't.created': '作成日時', 't.expires': '有効期限', 't.revoked': '失効日時',
  't.revoke': '失効させる', 't.revoke_title': 'トークン {id} を失効させますか?',
  't.revoke_text': 'このトークンを使った呼び出しは今後すべて拒否されます。元に戻すことはできません。',
  't.create_btn': '作成', 'never': '無期限',
  'a.title': '監査ログ', 'a.actor': '実行者 (トークン ID)', 'a.action': '操作 (部分一致)',
  'a.id': '#', 'a.at': '日時', 'a.status': 'ステータス', 'a.remote': '接続元', 'a.detail': '詳細',
  'a.filter': '絞り込み',
};

const dictionaries = { en, ja };
let current = 'en';
try {
  current = localStorage.getItem('ichido.lang') ||
      ((navigator.language || '').toLowerCase().startsWith('ja') ? 'ja' : 'en');
} catch (e) {
  current = 'en';
}
if (!dictionaries[current]) current = 'en';

export function lang() { return current; }

export function setLang(l) {
  current = dictionaries[l] ? l : 'en';
  try { localStorage.setItem('ichido.lang', current); } catch (e) { /* private mode */ }
}

export function t(key, vars) {
  let s = dictionaries[current][key] ?? en[key] ?? key;
  if (vars) {
    for (const [k, v] of Object.entries(vars)) s = s.split('{' + k + '}').join(String(v));
  }
  return s;
}

// Fills every element with data-i18n in `root` with its text.
export function translate(root) {
  document.documentElement.lang = current;
  for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
}

// The name of month 1-12 in the user's language ("April", "4月").
export function monthName(m) {
  return new Date(2000, m - 1, 1).toLocaleString(current === 'ja' ? 'ja-JP' : 'en-GB', { month: 'long' });
}

// Dates in the user's language and time zone (the API speaks UTC).
export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(current === 'ja' ? 'ja-JP' : 'en-GB', { hour12: false });
}
