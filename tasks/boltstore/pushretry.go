package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
)

// AddPushRetry stores an operator's request to deliver now beside the push
// config's delivery state, where the delivery worker finds it (also after a
// restart); ErrNotFound if the config does not exist.
func (s *Store) AddPushRetry(ctx context.Context, task a2a.TaskID, config string, r tasks.PushRetry) error {
	err := s.changePush(ctx, task, config, func(rec *pushRecord) {
		rec.Retries = append(rec.Retries, r)
	})
	if err != nil {
		return fmt.Errorf("add push retry to %s of task %s: %w", config, task, err)
	}
	return nil
}

// RemovePushRetry drops a request the delivery worker has handled; a
// request or config that is gone already is not an error.
func (s *Store) RemovePushRetry(ctx context.Context, task a2a.TaskID, config, id string) error {
	err := s.changePush(ctx, task, config, func(rec *pushRecord) {
		kept := rec.Retries[:0]
		for _, r := range rec.Retries {
			if r.ID != id {
				kept = append(kept, r)
			}
		}
		rec.Retries = kept
	})
	if err != nil && !errors.Is(err, tasks.ErrNotFound) {
		return fmt.Errorf("remove push retry %s from %s of task %s: %w", id, config, task, err)
	}
	return nil
}

// changePush rewrites one push record in a transaction of its own.
func (s *Store) changePush(ctx context.Context, task a2a.TaskID, config string, change func(*pushRecord)) error {
	return s.update(ctx, &boltWrite{fn: func(tx *bolt.Tx) error {
		key := pushKey(task, config)
		old := tx.Bucket(bucketPush).Get(key)
		if old == nil {
			return tasks.ErrNotFound
		}
		rec, err := decodePush(old)
		if err != nil {
			return err
		}
		change(rec)
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketPush).Put(key, b)
	}})
}
