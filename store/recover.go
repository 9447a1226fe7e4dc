package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Crash recovery. Every open Store holds an exclusive lock on a file of its
// own, <db>-owners/<instance>.lock, and stamps its instance id on the runs
// it starts. The operating system drops the lock when the process ends,
// however it ends, so a run still "running" whose instance's lock can be
// taken belongs to a process that is gone: Open marks it interrupted. Stores
// open on the same database, in this process or another, keep their runs.
// (The directory keeps the name it had when instances were called owners,
// so that stores of both versions see each other's locks.)

// notPaused selects the runs that do not wait for their client: a paused
// run is running in no process, and outlives them.
const notPaused = `NOT ` + isPaused

// isPaused selects the runs that wait for their client.
const isPaused = `exec_id IN (SELECT exec_id FROM resumable WHERE paused = 1)`

// interruptedError is the Error of a run whose process ended before it did.
const interruptedError = "the process running it ended before the run finished"

func instanceDir(dbPath string) string { return dbPath + "-owners" }

// recoverDead marks the running runs of instances that no longer hold their lock
// as interrupted and returns how many it marked.
func (s *Store) recoverDead(ctx context.Context) (int, error) {
	rows, err := s.writer.QueryContext(ctx,
		`SELECT DISTINCT instance FROM runs WHERE status = 'running' AND instance != ? AND `+notPaused, s.instance)
	if err != nil {
		return 0, err
	}
	var instances []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return 0, err
		}
		instances = append(instances, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}

	total := 0
	for _, o := range instances {
		lock, alive, err := probeInstance(instanceDir(s.path), o)
		if err != nil {
			return total, fmt.Errorf("checking instance %s: %w", o, err)
		}
		if alive {
			continue
		}
		n, err := s.interruptInstance(ctx, o)
		total += n
		if lock != nil {
			// Holding the dead instance's lock until its runs are marked keeps a
			// concurrent Open from doing the same work; then the file goes.
			if rerr := lock.release(true); rerr != nil && !os.IsNotExist(rerr) {
				s.log.Warn("removing a dead instance's lock file", "instance", o, "err", rerr)
			}
		}
		if err != nil {
			return total, err
		}
	}
	s.sweepLocks()
	return total, nil
}

// staleLockAge is how old a lock file must be before sweepLocks may remove
// it: younger ones may belong to a store that has created but not yet
// locked it.
const staleLockAge = time.Minute

// sweepLocks removes the lock files of ended instances that left no running
// runs behind, so they do not pile up. Failures only cost disk entries and
// are logged.
func (s *Store) sweepLocks() {
	dir := instanceDir(s.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.log.Warn("listing instance lock files", "dir", dir, "err", err)
		return
	}
	for _, e := range entries {
		instance, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || instance == s.instance {
			continue
		}
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < staleLockAge {
			continue
		}
		lock, alive, err := probeInstance(dir, instance)
		if err != nil || alive || lock == nil {
			continue
		}
		if err := lock.release(true); err != nil && !os.IsNotExist(err) {
			s.log.Warn("removing a dead instance's lock file", "instance", instance, "err", err)
		}
	}
}

// interruptInstance marks the running runs of instance, and their running
// steps, interrupted.
func (s *Store) interruptInstance(ctx context.Context, instance string) (int, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE steps SET status = 'interrupted'
		WHERE status = 'running' AND exec_id IN (SELECT exec_id FROM runs WHERE status = 'running' AND instance = ? AND `+notPaused+`)`,
		instance); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'interrupted', error = ?
		WHERE status = 'running' AND instance = ? AND `+notPaused, interruptedError, instance)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
}

// probeInstance reports whether instance still holds its lock. When it does not,
// the returned lock is held by the caller, who releases it; it is nil when
// the lock file does not exist.
func probeInstance(dir, instance string) (*instanceLock, bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, instance+".lock"), os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return nil, false, nil // closed or cleaned up: nobody runs these runs
	}
	if err != nil {
		return nil, false, err
	}
	ok, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, false, err
	}
	if !ok {
		f.Close()
		return nil, true, nil
	}
	return &instanceLock{f: f}, false, nil
}

// instanceLock is a held lock file.
type instanceLock struct {
	f *os.File
}

// acquireInstanceLock creates and locks dir/instance.lock.
func acquireInstanceLock(dir, instance string) (*instanceLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, instance+".lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	ok, err := tryLock(f)
	if err == nil && !ok {
		err = fmt.Errorf("lock file %s is held", f.Name())
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &instanceLock{f: f}, nil
}

// release removes the lock file if asked, then closes it, which drops the
// lock. Removing first means nobody can take a lock on a file about to
// vanish; where an open file cannot be removed, it is removed after closing.
func (l *instanceLock) release(remove bool) error {
	var rmErr error
	if remove {
		rmErr = os.Remove(l.f.Name())
	}
	if err := l.f.Close(); err != nil {
		return err
	}
	if rmErr != nil && !os.IsNotExist(rmErr) {
		rmErr = os.Remove(l.f.Name())
	}
	return rmErr
}
