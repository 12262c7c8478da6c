// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	gos3lect "github.com/nadrama-com/s3lect"
)

// s3Storage is Go s3lect's Storage on aws-sdk-go-v2: Go s3lect has no S3
// client of its own. Credentials come from the SDK's default chain (the
// environment in the tests and the bench).
type s3Storage struct {
	client  *s3.Client
	bucket  string
	timeout time.Duration
}

func newS3Storage(ctx context.Context, bucket, endpoint, region string, timeout time.Duration) (*s3Storage, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	})
	return &s3Storage{client: client, bucket: bucket, timeout: timeout}, nil
}

func (s *s3Storage) Get(ctx context.Context, key string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		if httpStatus(err) == http.StatusNotFound {
			return nil, "", gos3lect.ErrStorageNotFound
		}
		return nil, "", err
	}
	defer drain(out.Body)
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", err
	}
	return data, aws.ToString(out.ETag), nil
}

// PutIfMatch writes with If-Match: etag, or If-None-Match: * for etag "".
// 412, 409 (a concurrent conditional write) and, with If-Match, 404 (the
// object is gone) all mean the condition did not hold.
func (s *s3Storage) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(data),
		ContentType: aws.String("application/json")}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	_, err := s.client.PutObject(ctx, in)
	if err != nil {
		switch httpStatus(err) {
		case http.StatusPreconditionFailed, http.StatusConflict:
			return fmt.Errorf("%w: %v", gos3lect.ErrStoragePrecondition, err)
		case http.StatusNotFound:
			if etag != "" {
				return fmt.Errorf("%w: %v", gos3lect.ErrStoragePrecondition, err)
			}
		}
		return err
	}
	return nil
}
