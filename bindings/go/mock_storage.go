// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// MockStorage is a Storage for tests, with the Go s3lect package's
// constructors and method set (Get, PutIfMatch, Cleanup): NewMock keeps the
// objects in memory, NewMockStorage in files under a directory. Its
// conditional writes are atomic, so electors that share one MockStorage
// (or, for NewMockStorage, one directory, even from several processes)
// elect exactly as over S3. It also implements ETagPutter, which saves the
// binding a read-back after every write. The zero value is an empty
// in-memory store.
type MockStorage struct {
	dir string // "" for the in-memory store

	mu   sync.Mutex
	objs map[string]mockObject // in-memory store
	gen  uint64                // in-memory etags: one generation per write
}

type mockObject struct {
	data []byte
	etag string
}

// mockLockName is the file that serialises writers of a directory store
// across processes; Get and Cleanup skip it.
const mockLockName = ".s3lect-mock.lock"

// NewMock returns an empty in-memory MockStorage. (Go s3lect's NewMock uses
// a temporary directory and panics if it cannot create one; this one cannot
// fail and leaves nothing behind.)
func NewMock() *MockStorage {
	return &MockStorage{objs: map[string]mockObject{}}
}

// NewMockStorage returns a MockStorage that keeps each object in the file
// baseDir/key, creating baseDir if needed. Writes go to a temporary file
// renamed into place under an exclusive lock on a file in baseDir, so
// several MockStorage values, in one process or many on one host, may share
// baseDir. The etag of an object is a hash of its contents.
func NewMockStorage(baseDir string) (*MockStorage, error) {
	if baseDir == "" {
		return nil, fmt.Errorf("s3lect: NewMockStorage: baseDir is required")
	}
	if err := os.MkdirAll(baseDir, 0o755); err != nil {
		return nil, fmt.Errorf("s3lect: NewMockStorage: creating the base directory: %w", err)
	}
	return &MockStorage{dir: baseDir}, nil
}

func (m *MockStorage) path(key string) (string, error) {
	if !filepath.IsLocal(key) || filepath.Base(key) == mockLockName {
		return "", fmt.Errorf("%w: key %q is not a relative path inside the storage directory", ErrStorageFatal, key)
	}
	return filepath.Join(m.dir, key), nil
}

func contentETag(data []byte) string {
	sum := sha256.Sum256(data)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// lockDir takes the directory store's cross-process write lock.
func (m *MockStorage) lockDir() (func(), error) {
	f, err := os.OpenFile(filepath.Join(m.dir, mockLockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Get returns the object's contents and etag, or ErrStorageNotFound.
func (m *MockStorage) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dir == "" {
		o, ok := m.objs[key]
		if !ok {
			return nil, "", ErrStorageNotFound
		}
		return bytes.Clone(o.data), o.etag, nil
	}
	p, err := m.path(key)
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(p) // writers rename complete files into place
	if os.IsNotExist(err) {
		return nil, "", ErrStorageNotFound
	}
	if err != nil {
		return nil, "", err
	}
	return data, contentETag(data), nil
}

// PutIfMatch stores data if the object's etag is etag, or, for etag "", if
// the object does not exist; otherwise it returns ErrStoragePrecondition.
func (m *MockStorage) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	_, err := m.PutIfMatchETag(ctx, key, data, etag)
	return err
}

// PutIfMatchETag is PutIfMatch that also returns the new etag (ETagPutter).
func (m *MockStorage) PutIfMatchETag(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dir == "" {
		cur, ok := m.objs[key]
		if (etag == "" && ok) || (etag != "" && (!ok || cur.etag != etag)) {
			return "", ErrStoragePrecondition
		}
		if m.objs == nil { // a zero MockStorage is an empty in-memory one
			m.objs = map[string]mockObject{}
		}
		m.gen++
		o := mockObject{data: bytes.Clone(data), etag: `"` + strconv.FormatUint(m.gen, 10) + `"`}
		m.objs[key] = o
		return o.etag, nil
	}
	p, err := m.path(key)
	if err != nil {
		return "", err
	}
	unlock, err := m.lockDir()
	if err != nil {
		return "", err
	}
	defer unlock()
	cur, err := os.ReadFile(p)
	switch {
	case os.IsNotExist(err):
		if etag != "" {
			return "", ErrStoragePrecondition
		}
	case err != nil:
		return "", err
	case etag == "" || contentETag(cur) != etag:
		return "", ErrStoragePrecondition
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", err
	}
	return contentETag(data), nil
}

// Cleanup removes every object.
func (m *MockStorage) Cleanup() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dir == "" {
		clear(m.objs)
		return nil
	}
	unlock, err := m.lockDir()
	if err != nil {
		return err
	}
	defer unlock()
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == mockLockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

var (
	_ Storage    = (*MockStorage)(nil)
	_ ETagPutter = (*MockStorage)(nil)
)
