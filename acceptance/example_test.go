package acceptance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
)

// receiptTool stands in for the local MCP tool that asks the payment provider about a receipt.
type receiptTool struct{}

func (receiptTool) RunTool(context.Context, string, map[string]any) (any, error) {
	return map[string]any{"status": "settled", "amount_cents": 1250}, nil
}

func Example() {
	contract, err := acceptance.ParseContract("refund.yaml", strings.NewReader(`
skill: refund
version: "1"
artifacts:
  receipt:
    type: object
    required: [receipt_id, amount_cents]
commit_requires:
  - {artifact: receipt, pointer: /receipt_id}
verifiers:
  - name: provider-confirms
    tool: payments.lookup_receipt
    arguments: {id: "receipt#/receipt_id"}
    condition: result.status == "settled" && result.amount_cents == evidence.receipt.amount_cents
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "ledger")
	defer os.RemoveAll(dir)
	ledger, err := acceptance.OpenBoltLedger(filepath.Join(dir, "ledger.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ledger.Close()
	gate, _ := acceptance.NewGate([]*acceptance.Contract{contract}, ledger, receiptTool{})

	claims := map[string]map[string]any{
		"honest": {"receipt_id": "re_1", "amount_cents": 1250},
		"lying":  {"receipt_id": "", "amount_cents": 1250},
		"greedy": {"receipt_id": "re_2", "amount_cents": 9999},
	}
	for _, peer := range []string{"honest", "lying", "greedy"} {
		d, err := gate.Decide(context.Background(), "refund", acceptance.Completion{
			DelegationID: peer,
			RemoteState:  a2a.TaskStateCompleted,
			Artifacts:    []*a2a.Artifact{{Name: "receipt", Parts: a2a.ContentParts{a2a.NewDataPart(claims[peer])}}},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s", peer, d.Outcome)
		for _, c := range d.Reasons {
			if !c.Passed {
				fmt.Printf("; %s: %s", c.Name, c.Reason)
			}
		}
		if !d.Settle {
			fmt.Printf("; decide again in %s", acceptance.Backoff(1))
		}
		fmt.Println()
	}
	entries, _ := ledger.List(context.Background(), 0)
	fmt.Println("ledger entries:", len(entries))
	// Output:
	// honest: committed
	// lying: unknown; requires receipt#/receipt_id: receipt#/receipt_id is empty; decide again in 1s
	// greedy: rejected; verifier provider-confirms: the verifier disagrees: result.amount_cents == evidence.receipt.amount_cents is false (result.amount_cents = 1250, evidence.receipt.amount_cents = 9999)
	// ledger entries: 1
}
