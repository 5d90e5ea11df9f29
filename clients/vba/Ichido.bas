Attribute VB_Name = "Ichido"
' ichido for VBA (Excel, Outlook, Access; Office 2010 or later, 32- or 64-bit): sequential
' numbers, locks and exactly-once processing that hold across macros, PCs and users.
' Needs the module IchidoJson. Uses MSXML2.ServerXMLHTTP.6.0 (part of Windows).
'
'   IchidoConnect "https://ichido.example.com", token, "shop"      ' once per session
'   Set n = IchidoNextNumber("receipts", "order-" & orderId)        ' n("formatted") = "R-0001"
'   Set claim = IchidoBegin(messageId, 300000)                      ' claim("outcome")
'   IchidoComplete messageId, claim("token"), "{""ticket"":""T-1""}", claim("lease_end_ms")
'   IchidoFail messageId, claim("token"), Err.Description
'   Set lock = IchidoAcquire("ledger", 10000, 30000): ... : IchidoRelease "ledger", lock("token")
'
' Every function returns the server's answer as a Scripting.Dictionary (use Set). Errors are
' raised as error number ICHIDO_ERROR with Err.Description "code: message"; the code, the HTTP
' status (0 without an answer) and the details are also in IchidoLastCode, IchidoLastStatus and
' IchidoLastDetails. Codes: the API's (counter_exhausted, stale_token, forbidden, ...) and
' unreachable, complete_unconfirmed, bad_answer, invalid_argument. IchidoLanguage "ja" makes the
' messages Japanese (the codes stay as they are).
'
' Outlook event handlers (ItemAdd) call IchidoInEvent True first: then every call makes one attempt
' of at most 3 s in all, and what fails is left for the retry pass, so Outlook never freezes.
'
' Retry rule (the same in every ichido client): calls that are safe to repeat are retried when no
' answer came, or on 503/429/502/504, waiting min(5 s, 0.5 s x (1 + n^2)) x [0.5, 1] before the
' n-th retry, re-sending the same key, token or request_id. Other answers raise at once.
Option Explicit

Public Const ICHIDO_ERROR As Long = vbObjectError + 7878

#If VBA7 Then
Private Declare PtrSafe Sub Sleep Lib "kernel32" (ByVal dwMilliseconds As Long)
#Else
Private Declare Sub Sleep Lib "kernel32" (ByVal dwMilliseconds As Long)
#End If

Public IchidoLastCode As String
Public IchidoLastStatus As Long
Public IchidoLastDetails As Object

Private mUrl As String
Private mToken As String
Private mNs As String
Private mOwner As String
Private mMaxAttempts As Long
Private mTimeoutMs As Long
Private mSeeded As Boolean
Private mProxy As String
Private mProxyBypass As String
Private mLang As String
Private mInEvent As Boolean

' Where ichido is and who calls: url like "https://ichido.example.com", a writer token of the
' namespace ns, and optionally the owner shown to others (default COMPUTERNAME:USERNAME), the
' timeout of one request, the attempts of a call that is safe to repeat, a proxy
' ("proxy.example.co.jp:8080", with the hosts that bypass it, default "<local>"; MSXML uses
' WinHTTP's proxy setting, not the browser's: without this argument run once, as administrator,
' netsh winhttp import proxy source=ie).
Public Sub IchidoConnect(ByVal url As String, ByVal token As String, ByVal ns As String, _
                         Optional ByVal owner As String = "", Optional ByVal timeoutMs As Long = 30000, _
                         Optional ByVal maxAttempts As Long = 4, Optional ByVal proxy As String = "", _
                         Optional ByVal proxyBypass As String = "<local>")
    If LCase$(Left$(url, 7)) <> "http://" And LCase$(Left$(url, 8)) <> "https://" Then
        RaiseIchido "invalid_argument", "the url must start with https:// (or http:// inside a trusted network) (got " & url & ")", 0
    End If
    Do While Right$(url, 1) = "/"
        url = Left$(url, Len(url) - 1)
    Loop
    CheckName "ns", ns
    mUrl = url
    mToken = token
    mNs = ns
    If owner = "" Then owner = Environ$("COMPUTERNAME") & ":" & Environ$("USERNAME")
    mOwner = owner
    mTimeoutMs = timeoutMs
    mMaxAttempts = maxAttempts
    mProxy = proxy
    mProxyBypass = proxyBypass
End Sub

' "ja": error messages (Err.Description) in Japanese for the codes users meet most, followed by
' the server's own message; the codes (IchidoLastCode) stay as they are. "" or "en": English.
Public Sub IchidoLanguage(ByVal lang As String)
    mLang = LCase$(lang)
End Sub

' True inside an Outlook event handler (ItemAdd): every call then makes one attempt of at most 3 s
' in all (no retries, no waiting), so an unreachable server cannot freeze Outlook; the item is left
' for the retry pass, which calls IchidoInEvent False (the default) and retries as usual.
Public Sub IchidoInEvent(ByVal inEvent As Boolean)
    mInEvent = inEvent
End Sub

' The text of escaped with each \uXXXX replaced by its character. Japanese text in these modules is
' written this way, so that every .bas file is ASCII and imports on any Windows code page.
Public Function IchidoText(ByVal escaped As String) As String
    IchidoText = JsonParse("""" & escaped & """")
End Function

' The Japanese message for an error code users meet ("" for others); IchidoLanguage "ja" puts it
' before the server's message. The same texts as clients/messages-ja.json.
Public Function IchidoMessageJa(ByVal code As String) As String
    Select Case code
        Case "counter_not_found"
            IchidoMessageJa = IchidoText("\u30ab\u30a6\u30f3\u30bf\u30fc\u304c\u898b\u3064\u304b\u308a\u307e\u305b\u3093\u3002\u30ab\u30a6\u30f3\u30bf\u30fc\u540d\u3068\u540d\u524d\u7a7a\u9593\uff08ICHIDO_NS\uff09\u3092\u78ba\u8a8d\u3057\u3001\u306a\u3051\u308c\u3070\u7ba1\u7406\u8005\u306b\u30ab\u30a6\u30f3\u30bf\u30fc\u306e\u4f5c\u6210\u3092\u4f9d\u983c\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "counter_exhausted"
            IchidoMessageJa = IchidoText("\u30ab\u30a6\u30f3\u30bf\u30fc\u304c\u4e0a\u9650\uff08max\uff09\u306b\u9054\u3057\u305f\u305f\u3081\u3001\u3053\u308c\u4ee5\u4e0a\u756a\u53f7\u3092\u767a\u884c\u3067\u304d\u307e\u305b\u3093\u3002\u7ba1\u7406\u8005\u306b\u9023\u7d61\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "key_required"
            IchidoMessageJa = IchidoText("\u3053\u306e\u30ab\u30a6\u30f3\u30bf\u30fc\u306f\u30ad\u30fc\u304c\u5fc5\u8981\u3067\u3059\u3002\u9805\u76ee\u3092\u8868\u3059\u30ad\u30fc\uff08\u30d5\u30a9\u30fc\u30e0\u306e\u56de\u7b54 ID\u3001\u6ce8\u6587\u756a\u53f7\u306a\u3069\uff09\u3092\u6e21\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "lock_timeout"
            IchidoMessageJa = IchidoText("\u5f85\u3061\u6642\u9593\u306e\u3046\u3061\u306b\u30ed\u30c3\u30af\u3092\u53d6\u5f97\u3067\u304d\u307e\u305b\u3093\u3067\u3057\u305f\u3002\u307b\u304b\u306e\u51e6\u7406\u304c\u30ed\u30c3\u30af\u3092\u6301\u3063\u3066\u3044\u307e\u3059\u3002\u3057\u3070\u3089\u304f\u3057\u3066\u304b\u3089\u3082\u3046\u4e00\u5ea6\u5b9f\u884c\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "in_progress"
            IchidoMessageJa = IchidoText("\u3053\u306e\u9805\u76ee\u306f\u307b\u304b\u306e\u5b9f\u884c\u304c\u51e6\u7406\u4e2d\u3067\u3059\u3002\u305d\u306e\u51e6\u7406\u304c\u7d42\u308f\u308c\u3070\u3001\u540c\u3058\u7d50\u679c\u304c\u8fd4\u308a\u307e\u3059\u3002")
        Case "dead"
            IchidoMessageJa = IchidoText("\u3053\u306e\u9805\u76ee\u306f\u5931\u6557\u304c\u7d9a\u3044\u305f\u305f\u3081\u6b62\u307e\u3063\u3066\u3044\u307e\u3059\uff08dead\uff09\u3002\u539f\u56e0\u3092\u76f4\u3057\u3066\u304b\u3089\u3001\u7ba1\u7406\u8005\u304c\u30c0\u30c3\u30b7\u30e5\u30dc\u30fc\u30c9\u3067\u30ea\u30bb\u30c3\u30c8\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "stale_token"
            IchidoMessageJa = IchidoText("\u3053\u306e\u5b9f\u884c\u306e\u30ea\u30fc\u30b9\u304c\u5207\u308c\u3001\u307b\u304b\u306e\u5b9f\u884c\u304c\u3053\u306e\u9805\u76ee\u3092\u5f15\u304d\u7d99\u304e\u307e\u3057\u305f\u3002\u3053\u306e\u5b9f\u884c\u306e\u7d50\u679c\u306f\u8a18\u9332\u3055\u308c\u307e\u305b\u3093\u3002")
        Case "not_holder"
            IchidoMessageJa = IchidoText("\u3053\u306e\u30ed\u30c3\u30af\u306f\u3082\u3046\u6301\u3063\u3066\u3044\u307e\u305b\u3093\uff08\u30ea\u30fc\u30b9\u304c\u5207\u308c\u305f\u304b\u3001\u89e3\u653e\u6e08\u307f\u3067\u3059\uff09\u3002")
        Case "lock_lost"
            IchidoMessageJa = IchidoText("\u30ed\u30c3\u30af\u3092\u6301\u3063\u3066\u51e6\u7406\u3057\u3066\u3044\u308b\u9593\u306b\u30ea\u30fc\u30b9\u304c\u5207\u308c\u3001\u307b\u304b\u306e\u5b9f\u884c\u304c\u30ed\u30c3\u30af\u3092\u53d6\u308a\u307e\u3057\u305f\u3002\u51e6\u7406\u304c\u91cd\u306a\u3063\u305f\u53ef\u80fd\u6027\u304c\u3042\u308a\u307e\u3059\u3002leaseMs \u3092\u51e6\u7406\u3088\u308a\u9577\u304f\u3059\u308b\u304b\u3001\u51e6\u7406\u4e2d\u306b lock.renew() \u3092\u547c\u3093\u3067\u304f\u3060\u3055\u3044\u3002")
        Case "fingerprint_mismatch"
            IchidoMessageJa = IchidoText("\u540c\u3058\u30ad\u30fc\u3067\u5185\u5bb9\u306e\u9055\u3046\u9805\u76ee\u304c\u9001\u3089\u308c\u307e\u3057\u305f\u3002\u30ad\u30fc\u304c\u9805\u76ee\u3054\u3068\u306b\u4e00\u610f\u306b\u306a\u3063\u3066\u3044\u308b\u304b\u78ba\u8a8d\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "complete_unconfirmed"
            IchidoMessageJa = IchidoText("\u51e6\u7406\u306f\u6210\u529f\u3057\u307e\u3057\u305f\u304c\u3001ichido \u304c\u5b8c\u4e86\u3092\u8a18\u9332\u3057\u305f\u304b\u78ba\u304b\u3081\u3089\u308c\u307e\u305b\u3093\u3067\u3057\u305f\u3002\u4e8c\u91cd\u51e6\u7406\u3092\u907f\u3051\u308b\u305f\u3081\u51e6\u7406\u306f\u3084\u308a\u76f4\u3055\u305a\u3001\u30ea\u30fc\u30b9\u304c\u5207\u308c\u308b\u524d\u306b\u5b8c\u4e86\u3092\u8a18\u9332\u3057\u76f4\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "unreachable"
            IchidoMessageJa = IchidoText("ichido \u306b\u63a5\u7d9a\u3067\u304d\u307e\u305b\u3093\u3067\u3057\u305f\u3002URL\u3001\u30cd\u30c3\u30c8\u30ef\u30fc\u30af\u3001\u30d7\u30ed\u30ad\u30b7\u306e\u8a2d\u5b9a\u3092\u78ba\u8a8d\u3057\u3066\u304f\u3060\u3055\u3044\u3002\u3082\u3046\u4e00\u5ea6\u5b9f\u884c\u3057\u3066\u3082\u4e8c\u91cd\u51e6\u7406\u306b\u306f\u306a\u308a\u307e\u305b\u3093\u3002")
        Case "unauthenticated"
            IchidoMessageJa = IchidoText("\u30c8\u30fc\u30af\u30f3\u304c\u306a\u3044\u304b\u3001\u6b63\u3057\u304f\u3042\u308a\u307e\u305b\u3093\uff08\u5931\u52b9\u3057\u3066\u3044\u308b\u53ef\u80fd\u6027\u304c\u3042\u308a\u307e\u3059\uff09\u3002ICHIDO_TOKEN \u3092\u78ba\u8a8d\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "forbidden"
            IchidoMessageJa = IchidoText("\u3053\u306e\u30c8\u30fc\u30af\u30f3\u3067\u306f\u3053\u306e\u64cd\u4f5c\u306f\u3067\u304d\u307e\u305b\u3093\uff08\u30ed\u30fc\u30eb\u304b\u540d\u524d\u7a7a\u9593\u304c\u9055\u3044\u307e\u3059\uff09\u3002\u7ba1\u7406\u8005\u306b\u3053\u306e\u540d\u524d\u7a7a\u9593\u306e writer \u30c8\u30fc\u30af\u30f3\u3092\u4f9d\u983c\u3057\u3066\u304f\u3060\u3055\u3044\u3002")
        Case "store_unavailable"
            IchidoMessageJa = IchidoText("ichido \u306e\u30b9\u30c8\u30a2\u304c\u4e00\u6642\u7684\u306b\u4f7f\u3048\u307e\u305b\u3093\u3002\u3057\u3070\u3089\u304f\u3057\u3066\u304b\u3089\u3082\u3046\u4e00\u5ea6\u5b9f\u884c\u3057\u3066\u304f\u3060\u3055\u3044\u3002\u540c\u3058\u30ad\u30fc\u306e\u547c\u3073\u51fa\u3057\u306f\u4e8c\u91cd\u51e6\u7406\u306b\u306a\u308a\u307e\u305b\u3093\u3002")
        Case "invalid_argument"
            IchidoMessageJa = IchidoText("\u5f15\u6570\u304c\u6b63\u3057\u304f\u3042\u308a\u307e\u305b\u3093\u3002")
        Case Else
            IchidoMessageJa = ""
    End Select
End Function

' The next number of counter for the item named by key (an order number, a Message-ID). The same
' key always gets the same number back (answer("replayed") = True).
' Answer: value, formatted, period, key, replayed, issued_at.
Public Function IchidoNextNumber(ByVal counter As String, ByVal key As String, _
                                 Optional ByVal note As String = "") As Object
    Dim body As String
    Dim answer As Object
    CheckName "counter", counter
    CheckKey key
    body = "{""key"":" & JsonString(key)
    If note <> "" Then body = body & ",""note"":" & JsonString(note)
    body = body & "}"
    Set answer = CallApi("POST", "/counters/" & counter & "/next", body, True, 0, 0)
    If Not JsonHas(answer, "formatted") Then RaiseIchido "bad_answer", "the answer has no number", 200
    Set IchidoNextNumber = answer
End Function

' Claims key. Answer("outcome"): "acquired" (token, attempt: do the work, then IchidoComplete or
' IchidoFail), "in_progress" (someone else holds it; owner, retry_after_ms), "completed" (done;
' result), "dead" (failed too often; an admin must reset it). Also lease_end_ms: when the lease
' ends on this PC's clock (for IchidoComplete). Retries re-send the same request_id, so a claim
' whose answer was lost is answered again instead of waiting for itself.
Public Function IchidoBegin(ByVal key As String, Optional ByVal leaseMs As Long = 60000, _
                            Optional ByVal waitMs As Long = 0, Optional ByVal fingerprint As String = "", _
                            Optional ByVal maxAttempts As Long = 0) As Object
    Dim body As String
    Dim answer As Object
    Dim sentAt As Double
    CheckKey key
    body = "{""key"":" & JsonString(key) & ",""owner"":" & JsonString(mOwner) & _
           ",""lease_ms"":" & JsonNumber(leaseMs) & ",""wait_ms"":" & JsonNumber(waitMs) & _
           ",""request_id"":" & JsonString(NewRequestId())
    If fingerprint <> "" Then body = body & ",""fingerprint"":" & JsonString(fingerprint)
    If maxAttempts > 0 Then body = body & ",""max_attempts"":" & JsonNumber(maxAttempts)
    body = body & "}"
    sentAt = NowMs()
    Set answer = CallApi("POST", "/once/begin", body, True, waitMs, 0)
    answer("lease_end_ms") = sentAt + leaseMs
    Set IchidoBegin = answer
End Function

' Records success with resultJson (any JSON up to 32 KiB, default null). Retried while no
' definitive answer comes; with leaseEndMs (IchidoBegin's lease_end_ms) until the lease ends, then
' raises complete_unconfirmed: the work succeeded but is not recorded - do NOT call IchidoFail.
Public Sub IchidoComplete(ByVal key As String, ByVal token As Double, _
                          Optional ByVal resultJson As String = "null", Optional ByVal leaseEndMs As Double = 0)
    Dim body As String
    Dim answer As Object
    body = "{""key"":" & JsonString(key) & ",""token"":" & JsonNumber(token) & ",""result"":" & resultJson & "}"
    On Error GoTo Failed
    Set answer = CallApi("POST", "/once/complete", body, True, 0, leaseEndMs)
    Exit Sub
Failed:
    If Err.Number = ICHIDO_ERROR And (IchidoLastStatus = 0 Or IsRetryableStatus(IchidoLastStatus)) Then
        RaiseIchido "complete_unconfirmed", "the work for " & key & " succeeded but ichido did not " & _
            "confirm recording it (" & Err.Description & "); record it with IchidoComplete before " & _
            "the lease ends, or the item will be processed again", IchidoLastStatus
    End If
    Err.Raise Err.Number, Err.Source, Err.Description
End Sub

' Reports that the work failed: the item becomes retryable (or dead after max_attempts, or at once
' with retryable = False). Never call it for work that succeeded.
Public Sub IchidoFail(ByVal key As String, ByVal token As Double, ByVal errorText As String, _
                      Optional ByVal retryable As Boolean = True)
    Dim body As String
    Dim answer As Object
    Dim retryJson As String
    If Len(errorText) > 4000 Then errorText = Left$(errorText, 4000)
    If retryable Then retryJson = "true" Else retryJson = "false"
    body = "{""key"":" & JsonString(key) & ",""token"":" & JsonNumber(token) & _
           ",""error"":" & JsonString(errorText) & ",""retry"":" & retryJson & "}"
    Set answer = CallApi("POST", "/once/fail", body, False, 0, 0)
End Sub

' Acquires lock name, waiting up to waitMs. Answer("acquired") True: answer("token") is the
' fencing token (release it with IchidoRelease); False: answer("holder") says who holds it.
Public Function IchidoAcquire(ByVal name As String, Optional ByVal waitMs As Long = 10000, _
                              Optional ByVal leaseMs As Long = 30000) As Object
    Dim body As String
    Dim answer As Object
    Dim sentAt As Double
    CheckName "lock name", name
    body = "{""owner"":" & JsonString(mOwner) & ",""wait_ms"":" & JsonNumber(waitMs) & _
           ",""lease_ms"":" & JsonNumber(leaseMs) & ",""request_id"":" & JsonString(NewRequestId()) & "}"
    sentAt = NowMs()
    Set answer = CallApi("POST", "/locks/" & name & "/acquire", body, True, waitMs, 0)
    answer("lease_end_ms") = sentAt + leaseMs
    Set IchidoAcquire = answer
End Function

' Releases lock name held with token (a lost release only costs the lease: the lock lapses).
Public Sub IchidoRelease(ByVal name As String, ByVal token As Double)
    Dim answer As Object
    CheckName "lock name", name
    Set answer = CallApi("POST", "/locks/" & name & "/release", "{""token"":" & JsonNumber(token) & "}", False, 0, 0)
End Sub

' Extends the lease of the once record key (long work: every third of the lease).
Public Function IchidoRenew(ByVal key As String, ByVal token As Double, Optional ByVal leaseMs As Long = 60000) As Object
    Dim body As String
    Dim sentAt As Double
    Dim answer As Object
    body = "{""key"":" & JsonString(key) & ",""token"":" & JsonNumber(token) & ",""lease_ms"":" & JsonNumber(leaseMs) & "}"
    sentAt = NowMs()
    Set answer = CallApi("POST", "/once/renew", body, True, 0, 0)
    answer("lease_end_ms") = sentAt + leaseMs
    Set IchidoRenew = answer
End Function

' --- plumbing -----------------------------------------------------------------------------------

' One API call with the retry rule. retry: safe to repeat. waitMs: the server may hold the answer
' that long. untilMs > 0: retry until then (NowMs) instead of mMaxAttempts times.
Private Function CallApi(ByVal method As String, ByVal path As String, ByVal body As String, _
                         ByVal retry As Boolean, ByVal waitMs As Long, ByVal untilMs As Double) As Object
    Dim http As Object
    Dim url As String
    Dim attempt As Long
    Dim status As Long
    Dim text As String
    Dim failure As String
    Dim answer As Object
    Dim delay As Double
    Dim base As Double
    Dim inTime As Boolean
    Dim errObj As Object
    Dim details As Object

    If mUrl = "" Then RaiseIchido "invalid_argument", "call IchidoConnect first", 0
    url = mUrl & "/v1/ns/" & mNs & path
    attempt = 0
    Do
        attempt = attempt + 1
        status = 0
        text = ""
        failure = ""
        Set http = CreateObject("MSXML2.ServerXMLHTTP.6.0")
        ' resolve, connect, send, receive (ms); the receive timeout covers a server-side wait.
        If mInEvent Then
            http.setTimeouts 500, 1000, 500, 1000
        Else
            http.setTimeouts 10000, 10000, mTimeoutMs, mTimeoutMs + waitMs
        End If
        ' 2: SXH_PROXY_SET_PROXY
        If mProxy <> "" Then http.setProxy 2, mProxy, mProxyBypass
        On Error Resume Next
        http.Open method, url, False
        http.setRequestHeader "Content-Type", "application/json"
        http.setRequestHeader "Accept", "application/json"
        If mToken <> "" Then http.setRequestHeader "Authorization", "Bearer " & mToken
        http.send body
        If Err.Number <> 0 Then
            failure = "no answer (" & Err.Description & ")"
        Else
            status = http.Status
            text = http.responseText
        End If
        On Error GoTo 0
        Set http = Nothing

        If failure = "" And status >= 200 And status < 300 Then
            Set answer = ParseAnswer(text, status)
            Set CallApi = answer
            Exit Function
        End If

        base = 500 * (1 + (attempt - 1) * (attempt - 1))
        If base > 5000 Then base = 5000
        delay = base / 2 + Rnd * base / 2
        If mInEvent Then
            inTime = False
        ElseIf untilMs > 0 Then
            inTime = (untilMs - NowMs() > 100)
            If delay > untilMs - NowMs() - 100 Then delay = untilMs - NowMs() - 100
        Else
            inTime = (attempt < mMaxAttempts)
        End If
        If retry And inTime And (failure <> "" Or IsRetryableStatus(status)) Then
            If delay > 0 Then Sleep CLng(delay)
        Else
            Exit Do
        End If
    Loop

    If failure <> "" Then
        RaiseIchido "unreachable", failure & " from " & url & " after " & attempt & " attempt(s)", 0
    End If
    Set answer = Nothing
    On Error Resume Next
    Set answer = JsonParse(text)
    On Error GoTo 0
    If JsonHas(answer, "error") Then
        Set errObj = answer("error")
        If JsonHas(errObj, "details") Then
            Set details = errObj("details")
        Else
            Set details = Nothing
        End If
        RaiseIchido CStr(errObj("code")), CStr(errObj("message")), status, details
    End If
    RaiseIchido "http_" & status, "HTTP " & status & ": " & Left$(text, 200), status
End Function

Private Function ParseAnswer(ByVal text As String, ByVal status As Long) As Object
    Dim answer As Object
    On Error Resume Next
    Set answer = JsonParse(text)
    If Err.Number <> 0 Then Set answer = Nothing
    On Error GoTo 0
    If answer Is Nothing Then
        RaiseIchido "bad_answer", "HTTP " & status & " that is not JSON; is the url an ichido server?", status
    End If
    If TypeName(answer) <> "Dictionary" Then
        RaiseIchido "bad_answer", "HTTP " & status & " that is not a JSON object", status
    End If
    Set ParseAnswer = answer
End Function

Private Function IsRetryableStatus(ByVal status As Long) As Boolean
    IsRetryableStatus = (status = 429 Or status = 502 Or status = 503 Or status = 504)
End Function

Private Sub RaiseIchido(ByVal code As String, ByVal message As String, ByVal status As Long, _
                        Optional ByVal details As Object = Nothing)
    Dim ja As String
    IchidoLastCode = code
    IchidoLastStatus = status
    If details Is Nothing Then
        Set IchidoLastDetails = CreateObject("Scripting.Dictionary")
    Else
        Set IchidoLastDetails = details
    End If
    If mLang = "ja" Then
        ja = IchidoMessageJa(code)
        If ja <> "" Then message = ja & " (" & message & ")"
    End If
    Err.Raise ICHIDO_ERROR, "ichido", code & ": " & message
End Sub

Private Sub CheckName(ByVal what As String, ByVal value As String)
    Dim i As Long
    Dim ch As String
    If Len(value) < 1 Or Len(value) > 128 Or value = "." Or value = ".." Then
        RaiseIchido "invalid_argument", what & " must be 1-128 characters of A-Z a-z 0-9 . _ - (got """ & value & """)", 0
    End If
    For i = 1 To Len(value)
        ch = Mid$(value, i, 1)
        If InStr(1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", ch, vbBinaryCompare) = 0 Then
            RaiseIchido "invalid_argument", what & " must be 1-128 characters of A-Z a-z 0-9 . _ - (got """ & value & """)", 0
        End If
    Next i
End Sub

Private Sub CheckKey(ByVal key As String)
    If Len(key) = 0 Then RaiseIchido "invalid_argument", "the key must name the item (it is empty)", 0
End Sub

' 32 random hex digits: one per claim, re-sent by its retries.
Private Function NewRequestId() As String
    Dim i As Long
    Dim out As String
    If Not mSeeded Then
        Randomize
        mSeeded = True
    End If
    For i = 1 To 8
        out = out & Right$("0000" & Hex$(Int(Rnd * 65536)), 4)
    Next i
    NewRequestId = LCase$(out)
End Function

' Milliseconds on this PC's clock, across midnight (Timer restarts at 0 then).
Private Function NowMs() As Double
    Dim t1 As Single
    Dim t2 As Single
    Dim d As Date
    Do
        t1 = Timer
        d = Date
        t2 = Timer
    Loop While t2 < t1
    NowMs = CDbl(d) * 86400000# + CDbl(t1) * 1000#
End Function
