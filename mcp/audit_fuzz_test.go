package mcp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeAuditRecord feeds the audit file's decoder arbitrary keys and values. It must
// never panic, and a record it accepts must survive a re-encode: stored again, it decodes
// to the same record.
func FuzzDecodeAuditRecord(f *testing.F) {
	for _, r := range []AuditRecord{
		{Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), TaskID: "t1", Principal: "bob", Tool: "ex__read_note",
			SnapshotVersion: "v1", ArgsDigest: "d", Decision: DecisionAllow, Outcome: OutcomeSuccess, ResultSHA256: "r", Duration: time.Second},
		{ID: "7", TaskID: "t2", Tool: "ex__write_note", Decision: DecisionAsk, Approver: "alice", Outcome: OutcomeApprovalRequired, Reason: "needs an approval"},
		{Tool: "ex__gone", Outcome: OutcomeUnavailableTool},
	} {
		raw, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint64(1), raw)
	}
	f.Add(uint64(0), []byte(`{"outcome":"success"}`))
	f.Add(uint64(2), []byte(`{"outcome":"exploded"}`))
	f.Add(uint64(3), []byte(`{"outcome":"success","decision":"maybe"}`))
	f.Add(uint64(4), []byte(`{"outcome":"success","time":"not a time","duration_ns":1e400}`))
	f.Fuzz(func(t *testing.T, seq uint64, value []byte) {
		key := binary.BigEndian.AppendUint64(nil, seq)
		r, err := decodeAuditRecord(key, value)
		if err != nil {
			return
		}
		if r.ID == "" {
			t.Fatalf("accepted %q without an ID", value)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", r, err)
		}
		r2, err := decodeAuditRecord(key, again)
		if err != nil {
			t.Fatalf("re-encoded record refused: %v (%s)", err, again)
		}
		if twice, _ := json.Marshal(r2); !bytes.Equal(twice, again) {
			t.Fatalf("record changed on a round trip:\n%s\n%s", again, twice)
		}
	})
}

func TestDecodeAuditRecordRefuses(t *testing.T) {
	key := binary.BigEndian.AppendUint64(nil, 1)
	for name, tc := range map[string]struct{ key, value []byte }{
		"short key":        {[]byte{1}, []byte(`{"outcome":"success"}`)},
		"zero key":         {make([]byte, 8), []byte(`{"outcome":"success"}`)},
		"not JSON":         {key, []byte(`{`)},
		"no outcome":       {key, []byte(`{}`)},
		"unknown outcome":  {key, []byte(`{"outcome":"exploded"}`)},
		"unknown decision": {key, []byte(`{"outcome":"success","decision":"maybe"}`)},
		"bad time":         {key, []byte(`{"outcome":"success","time":"yesterday"}`)},
	} {
		t.Run(name, func(t *testing.T) {
			if r, err := decodeAuditRecord(tc.key, tc.value); err == nil {
				t.Errorf("accepted as %+v", r)
			}
		})
	}
}
