// SPDX-License-Identifier: Apache-2.0

// Command apicheck names every exported identifier of Go s3lect (snapshot
// c45cfbd) with the type Go s3lect gives it. It builds against the s3lect Go
// binding, and, with the import line changed, against Go s3lect itself
// (the binding's tests do both; the second needs GOS3LECT_SRC), so the
// binding is a superset of that API. Running it prints one line.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	s3lect "github.com/s3lect/s3lect/bindings/go"
)

// Functions and methods, with their exact signatures.
var (
	_ func(s3lect.S3ElectorOptions) (*s3lect.S3Elector, error)                   = s3lect.NewS3Elector
	_ func(s3lect.HealthServerConfig) (*s3lect.HealthServer, error)              = s3lect.NewHealthServer
	_ func(s3lect.Elector, *slog.Logger) http.HandlerFunc                        = s3lect.NewLeadershipHandler
	_ func() *s3lect.MockStorage                                                 = s3lect.NewMock
	_ func(string) (*s3lect.MockStorage, error)                                  = s3lect.NewMockStorage
	_ func(*s3lect.ElectorConfig) error                                          = (*s3lect.ElectorConfig).Validate
	_ func(*s3lect.HealthServer, context.Context) error                          = (*s3lect.HealthServer).Start
	_ func(*s3lect.HealthServer, context.Context) error                          = (*s3lect.HealthServer).Stop
	_ func(*s3lect.MockStorage) error                                            = (*s3lect.MockStorage).Cleanup
	_ func(*s3lect.S3Elector, context.Context) error                             = (*s3lect.S3Elector).Start
	_ func(*s3lect.S3Elector) error                                              = (*s3lect.S3Elector).Stop
	_ func(*s3lect.S3Elector) bool                                               = (*s3lect.S3Elector).IsLeader
	_ func(*s3lect.S3Elector, context.Context) error                             = (*s3lect.S3Elector).WaitForLeadership
	_ func(*s3lect.S3Elector) string                                             = (*s3lect.S3Elector).LeaderID
	_ func(*s3lect.S3Elector) *s3lect.LeadershipStatus                           = (*s3lect.S3Elector).GetLeadershipStatus
	_ func(*s3lect.S3Elector, []byte) error                                      = (*s3lect.S3Elector).EnablePeerMode
	_ func(*s3lect.S3Elector, s3lect.ElectorConfig) error                        = (*s3lect.S3Elector).UpdateConfig
	_ func(*s3lect.S3Elector) *s3lect.ElectorConfig                              = (*s3lect.S3Elector).GetConfig
	_ func(*s3lect.MockStorage, context.Context, string) ([]byte, string, error) = (*s3lect.MockStorage).Get
	_ func(*s3lect.MockStorage, context.Context, string, []byte, string) error   = (*s3lect.MockStorage).PutIfMatch
)

// Interfaces and the types that implement them.
var (
	_ s3lect.Elector = (*s3lect.S3Elector)(nil)
	_ s3lect.Storage = (*s3lect.MockStorage)(nil)
	_ error          = s3lect.ErrStorageNotFound
	_ error          = s3lect.ErrStoragePrecondition
)

// Struct fields, by name and type.
var (
	_ = s3lect.ElectorConfig{
		LockfilePath:        "",
		ServerID:            "",
		ServerAddr:          "",
		FrequentInterval:    time.Duration(0),
		InfrequentInterval:  time.Duration(0),
		LeaderTimeout:       time.Duration(0),
		PeerMode:            false,
		PeerTimeout:         time.Duration(0),
		PeerCACert:          []byte(nil),
		OnAcquireLeadership: func(context.Context) error { return nil },
		OnLoseLeadership:    func(context.Context) error { return nil },
	}
	_ = s3lect.LeadershipStatus{
		ServerID:         "",
		LockfilePath:     "",
		IsLeader:         false,
		LeaderID:         "",
		LeaderAddr:       "",
		LeaderLastSeen:   time.Time{},
		LastElectionTime: time.Time{},
		ConsecutiveFails: int(0),
	}
	_ = s3lect.LeaderRecord{
		LeaderID:    "",
		LeaderAddr:  "",
		LastUpdated: time.Time{},
		Metadata:    s3lect.LeaderRecordMetadata{ETag: ""},
	}
	_ = s3lect.S3ElectorOptions{
		Config:  (*s3lect.ElectorConfig)(nil),
		Storage: s3lect.Storage(nil),
		Logger:  (*slog.Logger)(nil),
	}
	_ = s3lect.HealthServerConfig{
		BindAddress: "",
		Certificate: tls.Certificate{},
		Elector:     s3lect.Elector(nil),
		Logger:      (*slog.Logger)(nil),
	}
	_ s3lect.HealthServer
)

// Storage, implemented by a program of its own.
type programStorage struct{}

func (programStorage) Get(ctx context.Context, key string) ([]byte, string, error) {
	return nil, "", s3lect.ErrStorageNotFound
}

func (programStorage) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	return s3lect.ErrStoragePrecondition
}

var _ s3lect.Storage = programStorage{}

func main() {
	_, _, err := programStorage{}.Get(context.Background(), "k")
	fmt.Println("Go s3lect c45cfbd API present; not found is ErrStorageNotFound:", errors.Is(err, s3lect.ErrStorageNotFound))
}
