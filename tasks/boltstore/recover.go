package boltstore

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"
)

// A Recovery is what [Recover] found in a store's write-ahead log: what
// a recovery applies, and what it gives up.
type Recovery struct {
	Applied uint64          `json:"applied"` // the last log record the store file had
	Replay  int             `json:"replay"`  // records a recovery applies (or applied)
	Tasks   []RecoveredTask `json:"tasks"`   // tasks that lose versions, by id
	Damage  []LogDamage     `json:"damage"`  // what of the log cannot be read, in log order
	Written bool            `json:"written"` // the recovery was applied: the store opens now
}

// Lossless reports whether recovering gives up nothing.
func (r *Recovery) Lossless() bool { return len(r.Tasks) == 0 && len(r.Damage) == 0 }

// A RecoveredTask is a task that loses versions in a recovery.
type RecoveredTask struct {
	ID       a2a.TaskID `json:"id"`
	LastGood uint64     `json:"last_good_version"` // the version the store holds after recovery; 0: none
	Lost     []uint64   `json:"versions_lost"`     // the versions of its log records that are dropped
}

// A LogDamage is a part of the log a recovery gives up.
type LogDamage struct {
	File    string `json:"file"` // the segment
	Offset  int64  `json:"offset"`
	Bytes   int64  `json:"bytes"`
	From    uint64 `json:"from_record"` // the first log record it held
	To      uint64 `json:"to_record"`   // the last; 0 when not known, below From when none
	Missing bool   `json:"missing"`     // no segment holds records From to To (a deleted segment)
	Torn    bool   `json:"torn"`        // the end of a write a crash cut short
}

// Recover reads the write-ahead log of the stopped store at path as
// opening it would, but gives up what opening refuses: it reports which
// records cannot be read, and which tasks then lose which versions (a
// task's later records are dropped once one of its versions is missing,
// since versions follow each other). With apply it then writes what can
// be applied to the store file, moves its log position past the whole
// log, and deletes the log, so that the store opens; without, it changes
// nothing. A damaged store file is refused (the log cannot repair it), as
// is a path with neither a store file nor a log (an error wrapping
// os.ErrNotExist). A store in use by another process is refused after
// timeout, with bbolt's ErrTimeout.
func Recover(path string, timeout time.Duration, apply bool) (*Recovery, error) {
	if err := checkBoltFile(path); err != nil {
		return nil, fmt.Errorf("recover task store %s: %w", path, err)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		scans, err := scanWAL(path, true) // no store file says which format the log is in
		if err != nil {
			return nil, fmt.Errorf("recover task store %s: %w", path, err)
		}
		if len(scans) == 0 {
			return nil, fmt.Errorf("recover task store %s: %w", path, os.ErrNotExist) // a wrong directory, most likely
		}
		if !apply {
			return recoverLog(nil, path, false) // a log without its store file: nothing applied yet
		}
	}
	var rec *Recovery
	err := guardFaults(path, func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: !apply, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
		if err != nil {
			return err
		}
		defer db.Close()
		if apply {
			err := db.Update(func(tx *bolt.Tx) error {
				for _, b := range [][]byte{bucketTasks, bucketPieces, bucketHeads, bucketEvents, bucketByOwner, bucketUnfinished, bucketPush, bucketMeta} {
					if _, err := tx.CreateBucketIfNotExists(b); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		rec, err = recoverLog(db, path, apply)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recover task store %s: %w", path, err)
	}
	return rec, nil
}

// recoverLog is Recover's work on the open store file (nil: none).
func recoverLog(db *bolt.DB, path string, apply bool) (*Recovery, error) {
	var applied uint64
	legacy := true
	if db != nil {
		err := db.View(func(tx *bolt.Tx) error {
			legacy = legacyLog(tx)
			if tx.Bucket(bucketMeta) == nil {
				return nil // a new file
			}
			var err error
			applied, err = logAppliedTx(tx)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	scans, err := scanWAL(path, legacy)
	if err != nil {
		return nil, err
	}
	recs, dropped, losses := salvageWAL(scans, applied)
	r := &Recovery{Applied: applied}
	last := applied // the highest record number the log used
	for _, l := range losses {
		r.Damage = append(r.Damage, LogDamage{File: l.path, Offset: int64(l.off), Bytes: int64(l.end - l.off),
			From: l.from, To: l.to, Missing: l.end == l.off && l.to >= l.from && !l.torn, Torn: l.torn})
		last = max(last, l.to)
	}
	// Replay as applyAppend would, keeping what follows each task's
	// version.
	heads := map[a2a.TaskID]*walHead{}
	head := func(tx *bolt.Tx, id a2a.TaskID) (*walHead, error) {
		if h, ok := heads[id]; ok {
			return h, nil
		}
		var h *walHead
		if tx != nil && tx.Bucket(bucketHeads) != nil {
			var err error
			if h, err = storedHead(tx, id); err != nil {
				return nil, err
			}
		}
		heads[id] = h
		return h, nil
	}
	lost := map[a2a.TaskID][]uint64{}
	var keep []*walAppend
	judge := func(tx *bolt.Tx) error {
		for _, a := range recs {
			last = max(last, a.seq)
			h, err := head(tx, a.id)
			if err != nil {
				return err
			}
			var version uint64
			if h != nil {
				version = h.version
			}
			if h != nil && !bytes.Equal(h.owner, a.owner) || a.version != version+a.events {
				lost[a.id] = append(lost[a.id], a.version)
				continue
			}
			heads[a.id] = &walHead{version: a.version, owner: a.owner}
			keep = append(keep, a)
		}
		return nil
	}
	if db == nil {
		err = judge(nil)
	} else {
		err = db.View(judge)
	}
	if err != nil {
		return nil, err
	}
	for _, a := range dropped {
		lost[a.id] = append(lost[a.id], a.version)
	}
	for id, versions := range lost {
		slices.Sort(versions)
		t := RecoveredTask{ID: id, Lost: slices.Compact(versions)}
		if h := heads[id]; h != nil {
			t.LastGood = h.version
		} else if db != nil {
			db.View(func(tx *bolt.Tx) error {
				if tx.Bucket(bucketHeads) != nil {
					if sh, err := storedHead(tx, id); err == nil && sh != nil {
						t.LastGood = sh.version
					}
				}
				return nil
			})
		}
		r.Tasks = append(r.Tasks, t)
	}
	slices.SortFunc(r.Tasks, func(a, b RecoveredTask) int { return cmp.Compare(a.ID, b.ID) })
	r.Replay = len(keep)
	if !apply {
		return r, nil
	}
	if err := applyRecords(db, keep, applied, max(last, applied)); err != nil {
		return nil, err
	}
	var paths []string
	for _, sc := range scans {
		paths = append(paths, sc.path)
	}
	if err := removeLog(path, paths); err != nil {
		return nil, err
	}
	r.Written = true
	return r, nil
}
