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
' unreachable, complete_unconfirmed, bad_answer, invalid_argument.
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

' Where ichido is and who calls: url like "https://ichido.example.com", a writer token of the
' namespace ns, and optionally the owner shown to others (default COMPUTERNAME:USERNAME).
Public Sub IchidoConnect(ByVal url As String, ByVal token As String, ByVal ns As String, _
                         Optional ByVal owner As String = "", Optional ByVal timeoutMs As Long = 30000, _
                         Optional ByVal maxAttempts As Long = 4)
    If LCase$(Left$(url, 7)) <> "http://" And LCase$(Left$(url, 8)) <> "https://" Then
        RaiseIchido "invalid_argument", "the url must start with https:// (got " & url & ")", 0
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
End Sub

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
        http.setTimeouts 10000, 10000, mTimeoutMs, mTimeoutMs + waitMs
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
        If untilMs > 0 Then
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
    IchidoLastCode = code
    IchidoLastStatus = status
    If details Is Nothing Then
        Set IchidoLastDetails = CreateObject("Scripting.Dictionary")
    Else
        Set IchidoLastDetails = details
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
