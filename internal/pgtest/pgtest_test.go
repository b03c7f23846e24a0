package pgtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

func TestServerServesDatabasesWithPasswordsOnly(t *testing.T) {
	s, err := Start()
	if errors.Is(err, ErrNotInstalled) {
		optional.Missing(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	url, err := s.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var user string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != User {
		t.Fatalf("current_user = %q, %v", user, err)
	}
	conn.Close(ctx)

	wrong := strings.Replace(url, s.Password(), "wrong", 1)
	if conn, err := pgx.Connect(ctx, wrong); err == nil {
		conn.Close(ctx)
		t.Fatal("a wrong password was accepted")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, url); err == nil {
		conn.Close(ctx)
		t.Fatal("the server still answers after Stop")
	}
}
