Attribute VB_Name = "IchidoJson"
' IchidoJson: JSON for VBA, enough for ichido's API and nothing more exotic.
'   JsonString(s)      "..." with every character that needs it escaped; non-ASCII as \uXXXX, so
'                      the body is plain ASCII whatever code page Office runs in
'   JsonNumber(d)      an integral Double (ichido's numbers are integers up to 2^53) as digits
'   JsonParse(text)    objects -> Scripting.Dictionary, arrays -> Collection, strings -> String,
'                      numbers -> Double, true/false -> Boolean, null -> Null. Use
'                      "Set x = JsonParse(...)" for an object or array. Invalid JSON raises
'                      error JSON_ERROR with the position.
'   JsonStringify(v)   a Dictionary / Collection / scalar (as JsonParse returns them) back to JSON
'   JsonHas(o, key)    True when the Dictionary o has key
' No dependencies but Scripting.Dictionary and Collection. 64-bit safe (no Declare).
Option Explicit

Public Const JSON_ERROR As Long = vbObjectError + 7801

Private mText As String
Private mPos As Long

Public Function JsonString(ByVal s As String) As String
    Dim out As String
    Dim i As Long
    Dim code As Long
    Dim ch As String
    out = """"
    For i = 1 To Len(s)
        ch = Mid$(s, i, 1)
        code = AscW(ch)
        If code < 0 Then code = code + 65536
        Select Case code
            Case 34
                out = out & "\"""
            Case 92
                out = out & "\\"
            Case 8
                out = out & "\b"
            Case 9
                out = out & "\t"
            Case 10
                out = out & "\n"
            Case 12
                out = out & "\f"
            Case 13
                out = out & "\r"
            Case 32 To 126
                out = out & ch
            Case Else
                ' Control characters and everything beyond ASCII, one UTF-16 unit at a time (a
                ' surrogate pair becomes two escapes, which JSON reads back as one character).
                out = out & "\u" & Right$("000" & LCase$(Hex$(code)), 4)
        End Select
    Next i
    JsonString = out & """"
End Function

Public Function JsonNumber(ByVal d As Double) As String
    Dim hi As Double
    Dim lo As Double
    Dim sign As String
    If d = Int(d) And Abs(d) <= 9007199254740992# Then
        ' Digits by arithmetic: Format$, CStr and CDec keep only 15 significant digits of a Double.
        If d < 0 Then sign = "-"
        d = Abs(d)
        hi = Int(d / 100000000#)
        lo = d - hi * 100000000#
        If hi > 0 Then
            JsonNumber = sign & CStr(CLng(hi)) & Format$(CLng(lo), "00000000")
        Else
            JsonNumber = sign & CStr(CLng(lo))
        End If
    Else
        JsonNumber = Trim$(Str$(d))
    End If
End Function

Public Function JsonHas(ByVal o As Object, ByVal key As String) As Boolean
    If o Is Nothing Then
        JsonHas = False
    ElseIf TypeName(o) <> "Dictionary" Then
        JsonHas = False
    Else
        JsonHas = o.Exists(key)
    End If
End Function

Public Function JsonParse(ByVal text As String) As Variant
    mText = text
    mPos = 1
    SkipSpace
    If PeekContainer() Then
        Set JsonParse = ParseAny()
    Else
        JsonParse = ParseAny()
    End If
    SkipSpace
    If mPos <= Len(mText) Then Fail "unexpected text after the value"
End Function

Public Function JsonStringify(ByVal v As Variant) As String
    Dim out As String
    Dim k As Variant
    Dim item As Variant
    Dim first As Boolean
    If IsObject(v) Then
        If v Is Nothing Then
            JsonStringify = "null"
        ElseIf TypeName(v) = "Dictionary" Then
            out = "{"
            first = True
            For Each k In v.Keys
                If Not first Then out = out & ","
                first = False
                out = out & JsonString(CStr(k)) & ":" & JsonStringify(v(k))
            Next k
            JsonStringify = out & "}"
        ElseIf TypeName(v) = "Collection" Then
            out = "["
            first = True
            For Each item In v
                If Not first Then out = out & ","
                first = False
                out = out & JsonStringify(item)
            Next item
            JsonStringify = out & "]"
        Else
            Err.Raise JSON_ERROR, "IchidoJson", "cannot write a " & TypeName(v) & " as JSON"
        End If
    ElseIf IsNull(v) Or IsEmpty(v) Then
        JsonStringify = "null"
    ElseIf VarType(v) = vbBoolean Then
        If v Then JsonStringify = "true" Else JsonStringify = "false"
    ElseIf VarType(v) = vbString Then
        JsonStringify = JsonString(v)
    ElseIf IsNumeric(v) Then
        JsonStringify = JsonNumber(CDbl(v))
    Else
        Err.Raise JSON_ERROR, "IchidoJson", "cannot write a " & TypeName(v) & " as JSON"
    End If
End Function

' --- the parser -------------------------------------------------------------------------------

Private Function ParseAny() As Variant
    Dim ch As String
    If mPos > Len(mText) Then Fail "unexpected end of the text"
    ch = Mid$(mText, mPos, 1)
    Select Case ch
        Case "{"
            Set ParseAny = ParseObject()
        Case "["
            Set ParseAny = ParseArray()
        Case """"
            ParseAny = ParseString()
        Case "t"
            Expect "true"
            ParseAny = True
        Case "f"
            Expect "false"
            ParseAny = False
        Case "n"
            Expect "null"
            ParseAny = Null
        Case Else
            ParseAny = ParseNumber()
    End Select
End Function

Private Function ParseObject() As Object
    Dim d As Object
    Dim key As String
    Set d = CreateObject("Scripting.Dictionary")
    mPos = mPos + 1
    SkipSpace
    If Mid$(mText, mPos, 1) = "}" Then
        mPos = mPos + 1
        Set ParseObject = d
        Exit Function
    End If
    Do
        SkipSpace
        If Mid$(mText, mPos, 1) <> """" Then Fail "a member name must be a string"
        key = ParseString()
        SkipSpace
        If Mid$(mText, mPos, 1) <> ":" Then Fail "':' expected"
        mPos = mPos + 1
        SkipSpace
        If d.Exists(key) Then d.Remove key
        d.Add key, ParseAny()
        SkipSpace
        Select Case Mid$(mText, mPos, 1)
            Case ","
                mPos = mPos + 1
            Case "}"
                mPos = mPos + 1
                Exit Do
            Case Else
                Fail "',' or '}' expected"
        End Select
    Loop
    Set ParseObject = d
End Function

Private Function ParseArray() As Object
    Dim c As Collection
    Set c = New Collection
    mPos = mPos + 1
    SkipSpace
    If Mid$(mText, mPos, 1) = "]" Then
        mPos = mPos + 1
        Set ParseArray = c
        Exit Function
    End If
    Do
        SkipSpace
        c.Add ParseAny()
        SkipSpace
        Select Case Mid$(mText, mPos, 1)
            Case ","
                mPos = mPos + 1
            Case "]"
                mPos = mPos + 1
                Exit Do
            Case Else
                Fail "',' or ']' expected"
        End Select
    Loop
    Set ParseArray = c
End Function

' True when the value at the current position is an object or an array (assigned with Set).
Private Function PeekContainer() As Boolean
    Dim ch As String
    ch = Mid$(mText, mPos, 1)
    PeekContainer = (ch = "{" Or ch = "[")
End Function

Private Function ParseString() As String
    Dim out As String
    Dim ch As String
    Dim start As Long
    mPos = mPos + 1
    Do
        If mPos > Len(mText) Then Fail "unterminated string"
        start = mPos
        Do While mPos <= Len(mText)
            ch = Mid$(mText, mPos, 1)
            If ch = """" Or ch = "\" Then Exit Do
            If AscW(ch) >= 0 And AscW(ch) < 32 Then Fail "a control character in a string"
            mPos = mPos + 1
        Loop
        out = out & Mid$(mText, start, mPos - start)
        If mPos > Len(mText) Then Fail "unterminated string"
        If ch = """" Then
            mPos = mPos + 1
            ParseString = out
            Exit Function
        End If
        ch = Mid$(mText, mPos + 1, 1)
        Select Case ch
            Case """", "\", "/"
                out = out & ch
                mPos = mPos + 2
            Case "b"
                out = out & ChrW$(8)
                mPos = mPos + 2
            Case "f"
                out = out & ChrW$(12)
                mPos = mPos + 2
            Case "n"
                out = out & ChrW$(10)
                mPos = mPos + 2
            Case "r"
                out = out & ChrW$(13)
                mPos = mPos + 2
            Case "t"
                out = out & ChrW$(9)
                mPos = mPos + 2
            Case "u"
                out = out & ChrW$(HexValue(Mid$(mText, mPos + 2, 4)))
                mPos = mPos + 6
            Case Else
                Fail "unknown escape \" & ch
        End Select
    Loop
End Function

' The value of 4 hex digits as a ChrW$ argument (-32768..32767: ChrW$ takes an Integer range).
Private Function HexValue(ByVal digits As String) As Long
    Dim i As Long
    Dim v As Long
    Dim d As Long
    If Len(digits) <> 4 Then Fail "\u needs 4 hex digits"
    v = 0
    For i = 1 To 4
        d = InStr(1, "0123456789abcdef", LCase$(Mid$(digits, i, 1)), vbBinaryCompare)
        If d = 0 Then Fail "\u needs 4 hex digits"
        v = v * 16 + (d - 1)
    Next i
    If v > 32767 Then v = v - 65536
    HexValue = v
End Function

Private Function ParseNumber() As Double
    Dim start As Long
    Dim i As Long
    Dim ch As String
    Dim v As Double
    Dim integral As Boolean
    start = mPos
    integral = True
    Do While mPos <= Len(mText)
        ch = Mid$(mText, mPos, 1)
        If InStr(1, "0123456789+-.eE", ch, vbBinaryCompare) = 0 Then Exit Do
        If InStr(1, "0123456789", ch, vbBinaryCompare) = 0 And Not (ch = "-" And mPos = start) Then
            integral = False
        End If
        mPos = mPos + 1
    Loop
    If mPos = start Then Fail "unexpected character"
    If Not integral Or mPos - start > 17 Then
        ' Val, unlike CDbl, ignores the locale: "." is always the decimal point.
        ParseNumber = Val(Mid$(mText, start, mPos - start))
        Exit Function
    End If
    ' Integers digit by digit: exact up to 2^53, the API's limit (Val may round long numbers).
    v = 0
    For i = start To mPos - 1
        ch = Mid$(mText, i, 1)
        If ch <> "-" Then v = v * 10 + (AscW(ch) - 48)
    Next i
    If Mid$(mText, start, 1) = "-" Then v = -v
    ParseNumber = v
End Function

Private Sub Expect(ByVal word As String)
    If Mid$(mText, mPos, Len(word)) <> word Then Fail "unexpected character"
    mPos = mPos + Len(word)
End Sub

Private Sub SkipSpace()
    Dim ch As String
    Do While mPos <= Len(mText)
        ch = Mid$(mText, mPos, 1)
        If ch <> " " And ch <> vbTab And ch <> vbCr And ch <> vbLf Then Exit Do
        mPos = mPos + 1
    Loop
End Sub

Private Sub Fail(ByVal what As String)
    Err.Raise JSON_ERROR, "IchidoJson", "invalid JSON at position " & mPos & ": " & what
End Sub
