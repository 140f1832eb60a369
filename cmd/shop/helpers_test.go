package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"gorm.io/gorm"

	"checkoutlab/cmd/shop/internal/labrun"
	"checkoutlab/cmd/shop/internal/stack"
	"checkoutlab/models"
	"checkoutlab/models/modelstest"
	"checkoutlab/payments/lab"
)

// fastEnv is the environment of a shop under test: short timeouts so failures resolve in a
// test's time, the same code paths as production.
var fastEnv = map[string]string{
	"GATEWAY_TIMEOUT":    "1s",
	"IDEMPOTENCY_LEASE":  "2s",
	"COMPLETER_INTERVAL": "200ms",
}

func withEnv(base map[string]string, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, extra)
	return out
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// testGateway is a fake gateway under test: its base URL and the control token its
// /_control/* wants (GATEWAY_CONTROL_TOKEN).
type testGateway struct{ URL, Token string }

// Stack is a running shop and the gateway it talks to.
type Stack struct {
	Shop    string // base URL of the shop
	Gateway testGateway
	Env     map[string]string
	DB      *gorm.DB // the shop's database
	// LoginURL is the operator's one-click login link: a client that GETs it with a cookie
	// jar is an operator afterwards (operatorClient, Page.LoginOperator).
	LoginURL string
	// OrderLink is the absolute signed link of an order's page, as its receipt carries it.
	OrderLink func(orderID string) string
	// Stop stops the stack before the test ends (a restart test); it is stopped then anyway.
	Stop func() error
}

// MustStartShop starts the real shop — the configuration and wiring of `serve` — in this
// process, on free ports, with the given extra environment, and returns its URLs. The stack
// stops (and must stop cleanly) when the test ends.
func MustStartShop(tb testing.TB, dialect string, extra map[string]string) Stack {
	tb.Helper()
	env := withEnv(map[string]string{
		"SHOP_ADDR":    "127.0.0.1:0",
		"GATEWAY_ADDR": "127.0.0.1:0",
		"DATA_DIR":     tb.TempDir(),
		"DATABASE_URL": modelstest.MustDatabaseURL(tb, dialect),
		"LOG_LEVEL":    "warn",
	}, extra)
	cfg, err := loadConfig(nil, envOf(env), io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Lab = testLab(tb, "")
	st, err := stack.Start(context.Background(), cfg, mountRoutes)
	if err != nil {
		tb.Fatalf("start the shop: %v", err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("close the shop: got %v, want a clean shutdown", err)
		}
	})
	return Stack{Shop: st.URL(), Gateway: testGateway{st.GatewayURL(), st.GatewayControlToken()}, Env: env, DB: st.DB(),
		LoginURL: st.OperatorLoginURL(), OrderLink: st.OrderLink, Stop: st.Close}
}

// operatorClient is a client logged in as an operator the way a person is: it opens the
// one-click login link the shop logs, with a cookie jar, and lands on the lab.
func operatorClient(tb testing.TB, st Stack) *http.Client {
	tb.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar} // no timeout: a lab run from the catalogue takes a while
	res, err := client.Get(st.LoginURL)
	if err != nil {
		tb.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/lab" {
		tb.Fatalf("operator login: got %d at %s, want 200 at /lab", res.StatusCode, res.Request.URL.Path)
	}
	return client
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// mustShopBinary builds cmd/shop once per test run and returns its path: the program the
// lab's crash scenarios run as their child shop.
func mustShopBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "checkoutlab-bin-"); buildErr != nil {
			return
		}
		if out, err := exec.Command("go", "build", "-o", binDir, "checkoutlab/cmd/shop").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build checkoutlab/cmd/shop: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return filepath.Join(binDir, "shop")
}

func TestMain(m *testing.M) {
	// This package's long tests (the lab's scenarios, chaos) mostly wait: for leases to run
	// out, webhooks to arrive, a killed shop to restart. go test runs only GOMAXPROCS parallel
	// tests at once (2 here), so they would queue behind each other while the CPUs idle; let
	// the four dialect runs of TestLab and TestChaos (parallel tests, which run once the others
	// are done) overlap. An explicit -parallel wins.
	flag.Parse()
	if !flagSet("test.parallel") {
		flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// flagSet reports whether the flag called name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// testLab is the failure lab as `shop lab` builds it, on databaseURL ("" for a fresh SQLite
// database per run), with the built shop as its crash scenarios' child.
func testLab(tb testing.TB, databaseURL string) *labrun.Runner {
	r := labRunner(mustShopBinary(tb))
	r.DatabaseURL = databaseURL
	return r
}

// httpClient is the tests' client for the shop's API and the gateway's control API.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// checkoutBody is a valid one-step checkout of two camp mugs with card.
func checkoutBody(card string) []byte {
	return labrun.CheckoutBody(lab.Checkout{Card: card}, "ada@example.com")
}

// post sends a JSON POST with the acme API key and an idempotency key ("" for none).
func post(base, path, key string, body []byte) labrun.Answer {
	return labrun.Post(context.Background(), httpClient, base+path, "sk_test_acme", key, body)
}

// retryUntilFinal retries a POST with the SAME key, as a careful client does, until it gets a
// final answer (labrun.Answer.Final), or gives up after attempts.
func retryUntilFinal(tb testing.TB, base, path, key string, body []byte, attempts int) (labrun.Answer, int) {
	tb.Helper()
	var a labrun.Answer
	for i := 1; i <= attempts; i++ {
		if a = post(base, path, key, body); a.Final() {
			return a, i
		}
		time.Sleep(300 * time.Millisecond)
	}
	tb.Fatalf("no final answer for key %s after %d attempts; last: %d %s %v", key, attempts, a.Status, a.Raw, a.Err)
	return a, attempts
}

func mustLedger(tb testing.TB, gw testGateway) []labrun.Charge {
	tb.Helper()
	charges, err := labrun.Ledger(context.Background(), httpClient, gw.URL, gw.Token)
	if err != nil {
		tb.Fatal(err)
	}
	return charges
}

// succeededCharges counts the order's succeeded charges in the gateway ledger: money that moved.
func succeededCharges(tb testing.TB, gw testGateway, orderID string) int {
	tb.Helper()
	n := 0
	for _, c := range mustLedger(tb, gw) {
		if c.Metadata["order_id"] == orderID && c.Status == "succeeded" {
			n++
		}
	}
	return n
}

// armFault arms a gateway fault through its control API.
func armFault(tb testing.TB, gw testGateway, fault map[string]any) {
	tb.Helper()
	if err := labrun.ArmFault(context.Background(), httpClient, gw.URL, gw.Token, fault); err != nil {
		tb.Fatal(err)
	}
}

// eventually polls cond until it holds or timeout passes.
func eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// effectsOf counts the receipts and shipments of an order.
func effectsOf(tb testing.TB, db *gorm.DB, orderID string) (receipts, shipments int) {
	tb.Helper()
	r, s, err := models.NewSideEffectStore(db).CountByOrder(context.Background(), []string{orderID})
	if err != nil {
		tb.Fatal(err)
	}
	return r[orderID], s[orderID]
}

// mustPage fetches with client an HTML page that must answer 200.
func mustPage(tb testing.TB, client *http.Client, url string) *goquery.Document {
	tb.Helper()
	res, err := client.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: got %d, want 200", url, res.StatusCode)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}
