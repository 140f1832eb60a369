package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Ledger returns every charge the gateway holds (GET /_control/ledger), for reconciliation,
// authenticated with ControlToken. The ledger of a long lab session can be large, so it is read with a generous limit of its own.
func (c *GatewayClient) Ledger(ctx context.Context) ([]GatewayCharge, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/_control/ledger", nil)
	if err != nil {
		return nil, err
	}
	if c.ControlToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.ControlToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("read ledger: %w", gatewayError(resp.StatusCode, body))
	}
	var ledger struct {
		Charges []GatewayCharge `json:"charges"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&ledger); err != nil {
		return nil, fmt.Errorf("decode ledger: %w", err)
	}
	return ledger.Charges, nil
}
