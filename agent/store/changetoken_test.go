package store

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func newToken(t *testing.T, now time.Time, ttl time.Duration) ChangeToken {
	t.Helper()
	id, err := NewChangeTokenID()
	if err != nil {
		t.Fatal(err)
	}
	return ChangeToken{
		ID:        id,
		Tool:      "system.reboot",
		Arguments: json.RawMessage(`{"delay_s":5}`),
		PlanHash:  "sha256:abc",
		Principal: "pi",
		CreatedAt: now,
		ExpiresAt: now.Add(ttl),
	}
}

func TestNewTokenID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id, err := NewChangeTokenID()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) != 16 || len(id) != 22 {
			t.Fatalf("id %q: %d bytes, %v", id, len(raw), err)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestTokenSingleUse(t *testing.T) {
	db := openTest(t)
	now := time.Now()
	tok := newToken(t, now, 5*time.Minute)
	if err := db.PutChangeToken(tok); err != nil {
		t.Fatal(err)
	}
	if err := db.PutChangeToken(tok); err == nil {
		t.Error("PutToken with an existing id succeeded")
	}
	got, err := db.ConsumeChangeToken(tok.ID, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || got.Tool != tok.Tool || string(got.Arguments) != string(tok.Arguments) ||
		got.PlanHash != tok.PlanHash || got.Principal != tok.Principal ||
		!got.CreatedAt.Equal(tok.CreatedAt) || !got.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Errorf("consumed %+v, stored %+v", got, tok)
	}
	if _, err := db.ConsumeChangeToken(tok.ID, now.Add(time.Minute)); !errors.Is(err, ErrChangeTokenNotFound) {
		t.Errorf("second consume: %v, want ErrTokenNotFound", err)
	}
	if _, err := db.ConsumeChangeToken("never-issued", now); !errors.Is(err, ErrChangeTokenNotFound) {
		t.Errorf("unknown id: %v, want ErrTokenNotFound", err)
	}
	if _, err := db.ConsumeChangeToken("", now); !errors.Is(err, ErrChangeTokenNotFound) {
		t.Errorf("empty id: %v, want ErrTokenNotFound", err)
	}
}

func TestTokenExpiry(t *testing.T) {
	db := openTest(t)
	now := time.Now()
	tok := newToken(t, now, time.Minute)
	if err := db.PutChangeToken(tok); err != nil {
		t.Fatal(err)
	}
	// Expiry is at ExpiresAt exactly.
	got, err := db.ConsumeChangeToken(tok.ID, tok.ExpiresAt)
	if !errors.Is(err, ErrChangeTokenExpired) {
		t.Fatalf("consume at expiry: %v, want ErrTokenExpired", err)
	}
	if got.Tool != "system.reboot" {
		t.Errorf("expired token not returned for the caller's message: %+v", got)
	}
	if _, err := db.ConsumeChangeToken(tok.ID, now); !errors.Is(err, ErrChangeTokenNotFound) {
		t.Errorf("expired token was not deleted: %v", err)
	}
}

func TestTokenConcurrentConsume(t *testing.T) {
	db := openTest(t)
	now := time.Now()
	tok := newToken(t, now, time.Minute)
	if err := db.PutChangeToken(tok); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		mu       sync.Mutex
		ok       int
		notFound int
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := db.ConsumeChangeToken(tok.ID, now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrChangeTokenNotFound):
				notFound++
			default:
				t.Errorf("consume: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok != 1 || notFound != n-1 {
		t.Errorf("%d successes, %d not found; want 1 and %d", ok, notFound, n-1)
	}
}

func TestPruneTokens(t *testing.T) {
	db := openTest(t)
	now := time.Now()
	var live []ChangeToken
	for i, ttl := range []time.Duration{-time.Minute, time.Minute, -time.Second, 0, time.Hour} {
		tok := newToken(t, now, ttl)
		if err := db.PutChangeToken(tok); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
		if ttl > 0 {
			live = append(live, tok)
		}
	}
	n, err := db.PruneChangeTokens(now)
	if err != nil || n != 3 {
		t.Fatalf("PruneTokens = %d, %v; want 3", n, err)
	}
	if n, _ := db.PruneChangeTokens(now); n != 0 {
		t.Errorf("second prune removed %d", n)
	}
	for _, tok := range live {
		if _, err := db.ConsumeChangeToken(tok.ID, now); err != nil {
			t.Errorf("live token %s: %v", tok.ID, err)
		}
	}
}

func TestPutTokenValidation(t *testing.T) {
	db := openTest(t)
	if err := db.PutChangeToken(ChangeToken{ExpiresAt: time.Now()}); err == nil {
		t.Error("PutToken without id succeeded")
	}
	if err := db.PutChangeToken(ChangeToken{ID: "x"}); err == nil {
		t.Error("PutToken without expiry succeeded")
	}
	tok := ChangeToken{ID: "no-args", ExpiresAt: time.Now().Add(time.Minute)}
	if err := db.PutChangeToken(tok); err != nil {
		t.Fatal(err)
	}
	got, err := db.ConsumeChangeToken("no-args", time.Now())
	if err != nil || string(got.Arguments) != "null" {
		t.Errorf("nil arguments round trip = %q, %v", got.Arguments, err)
	}
}

// Change tokens keep the bucket name "tokens" that files written before the
// rename use: a token a previous build stored (plain bbolt, its JSON) is
// still consumed after an upgrade, and nothing else claims that name.
func TestChangeTokenBucketName(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	tok := newToken(t, now, time.Hour)
	val, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	db := tamper(t, openTest(t), func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("tokens")).Put([]byte(tok.ID), val)
	})
	got, err := db.ConsumeChangeToken(tok.ID, now)
	if err != nil || got.Tool != tok.Tool || got.PlanHash != tok.PlanHash {
		t.Fatalf("token stored under \"tokens\": %+v, %v", got, err)
	}
}

// A check that refuses leaves the token as it was, for its holder; of
// concurrent consumes that pass the check, exactly one gets the token,
// however many others the check refuses meanwhile.
func TestTokenConsumeIfKeepsOnRefusal(t *testing.T) {
	db := openTest(t)
	now := time.Now()
	tok := newToken(t, now, time.Minute)
	if err := db.PutChangeToken(tok); err != nil {
		t.Fatal(err)
	}
	errNotYours := errors.New("not yours")
	holder := func(who string) func(ChangeToken) error {
		return func(c ChangeToken) error {
			if c.Principal != who {
				return errNotYours
			}
			return nil
		}
	}
	got, err := db.ConsumeChangeTokenIf(tok.ID, now, holder("mallory"))
	if err != errNotYours || got.ID != tok.ID {
		t.Fatalf("refused consume: %+v, %v; want the token and the check's own error", got, err)
	}
	const n = 20
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		results = map[string]int{}
	)
	for i := range n {
		who := []string{"pi", "mallory"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := db.ConsumeChangeTokenIf(tok.ID, now, holder(who))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				results["ok"]++
			case errors.Is(err, ErrChangeTokenNotFound) && who == "pi":
				results["not found"]++
			case err == errNotYours && who == "mallory":
			case errors.Is(err, ErrChangeTokenNotFound) && who == "mallory":
			default:
				t.Errorf("%s: %v", who, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if results["ok"] != 1 || results["not found"] != n/2-1 {
		t.Errorf("holder's consumes: %v; want 1 ok and %d not found", results, n/2-1)
	}
	// An expired token is the check's to judge too: refused, it stays
	// (prune removes it); passed, it is deleted and reported expired.
	old := newToken(t, now, time.Minute)
	if err := db.PutChangeToken(old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ConsumeChangeTokenIf(old.ID, old.ExpiresAt, holder("mallory")); err != errNotYours {
		t.Fatalf("expired, refused: %v", err)
	}
	if _, err := db.ConsumeChangeTokenIf(old.ID, old.ExpiresAt, holder("pi")); !errors.Is(err, ErrChangeTokenExpired) {
		t.Fatalf("expired, holder: %v", err)
	}
	if _, err := db.ConsumeChangeToken(old.ID, now); !errors.Is(err, ErrChangeTokenNotFound) {
		t.Errorf("expired token was not deleted: %v", err)
	}
}
