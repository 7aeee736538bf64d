package handoff

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// rpcEnvelope is a JSON-RPC request as streamJSONRPC reads it.
type rpcEnvelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// parseSend decodes the commonest SendMessage and SendStreamingMessage
// request, a message of text parts and nothing else, in one pass and with
// few allocations: encoding/json took the envelope, the params, the parts
// and each part's content apart in four passes, about a tenth of a blocking
// send's CPU. It fills env (all but Params) and req exactly as encoding/json
// and a2a-go's unmarshalers would, and reports false, leaving them to
// encoding/json, for anything else: another member (configuration,
// metadata, a file or data part, a key in another case), a repeated member,
// an escape or invalid UTF-8 in a string, null, an empty parts list, any
// other method. FuzzParseSend holds it to encoding/json's results.
//
// Written by hand: the JSON libraries that decode faster than encoding/json
// still call a2a-go's UnmarshalJSON methods, which decode with encoding/json.
func parseSend(data []byte, env *rpcEnvelope, req *a2a.SendMessageRequest) bool {
	p := sendParser{b: data}
	var msg *a2a.Message
	seen := 0
	const (
		sawJSONRPC = 1 << iota
		sawID
		sawMethod
		sawParams
	)
	ok := p.object(func(key []byte) bool {
		switch string(key) {
		case "jsonrpc":
			s, ok := p.str()
			env.JSONRPC = s
			return ok && seen&sawJSONRPC == 0 && markSeen(&seen, sawJSONRPC)
		case "id":
			id, ok := p.id()
			env.ID = id
			return ok && seen&sawID == 0 && markSeen(&seen, sawID)
		case "method":
			s, ok := p.str()
			env.Method = s
			return ok && seen&sawMethod == 0 && markSeen(&seen, sawMethod)
		case "params":
			if seen&sawParams != 0 {
				return false
			}
			seen |= sawParams
			return p.object(func(key []byte) bool {
				if string(key) != "message" || msg != nil {
					return false
				}
				msg = &a2a.Message{}
				return p.message(msg)
			})
		}
		return false
	})
	if !ok || !p.end() || seen != sawJSONRPC|sawID|sawMethod|sawParams || msg == nil ||
		env.JSONRPC != "2.0" || (env.Method != "SendMessage" && env.Method != "SendStreamingMessage") {
		return false
	}
	req.Message = msg
	return true
}

func markSeen(seen *int, bit int) bool {
	*seen |= bit
	return true
}

// sendParser reads JSON from b at i. Each method skips the whitespace
// before its value and reports false on anything it does not take.
type sendParser struct {
	b []byte
	i int
}

func (p *sendParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// end reports whether only whitespace is left.
func (p *sendParser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// byte takes c.
func (p *sendParser) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// rawStr returns the bytes of a string without escapes or control
// characters, in valid UTF-8.
func (p *sendParser) rawStr() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	ascii := true
	for ; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (p *sendParser) str() (string, bool) {
	s, ok := p.rawStr()
	return string(s), ok
}

// id reads a request id as encoding/json decodes it into any: a string, or
// a number as a float64.
func (p *sendParser) id() (any, bool) {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '"' {
		return p.str()
	}
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return nil, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	return f, err == nil
}

// digits takes one or more decimal digits.
func (p *sendParser) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// object reads an object, calling member at each key with the parser at
// its value, which member reads.
func (p *sendParser) object(member func(key []byte) bool) bool {
	if !p.byte('{') {
		return false
	}
	if p.byte('}') {
		return true
	}
	for {
		key, ok := p.rawStr()
		if !ok || !p.byte(':') || !member(key) {
			return false
		}
		if p.byte('}') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}

// message reads a message of string members and text parts.
func (p *sendParser) message(m *a2a.Message) bool {
	seen := 0
	once := func(bit int) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	return p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "messageId":
			m.ID, ok = p.str()
			return ok && once(1)
		case "contextId":
			m.ContextID, ok = p.str()
			return ok && once(2)
		case "taskId":
			var s string
			s, ok = p.str()
			m.TaskID = a2a.TaskID(s)
			return ok && once(4)
		case "role":
			var s string
			s, ok = p.str()
			if s == "ROLE_UNSPECIFIED" { // as MessageRole.UnmarshalJSON reads it
				s = ""
			}
			m.Role = a2a.MessageRole(s)
			return ok && once(8)
		case "parts":
			return once(16) && p.parts(m)
		}
		return false
	})
}

// parts reads a non-empty array of parts that hold only text.
func (p *sendParser) parts(m *a2a.Message) bool {
	if !p.byte('[') {
		return false
	}
	for {
		var text string
		got := false
		if !p.object(func(key []byte) bool {
			if string(key) != "text" || got {
				return false
			}
			var ok bool
			text, ok = p.str()
			got = true
			return ok
		}) || !got {
			return false
		}
		m.Parts = append(m.Parts, &a2a.Part{Content: a2a.Text(text)})
		if p.byte(']') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}
