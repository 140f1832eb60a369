package lab

// The "ask the room" questions of docs/lab.md, by workshop block: presenter mode asks them
// before it reveals what the run did. Keep them in step with the workshop's text.
var prompts = map[string][]string{
	"lost": {
		"The shop sent the charge and got a connection reset. Did the customer pay?",
		"The client retries. What must the shop do: charge again, fail the order, or something else? What does it need to know in order to decide?",
		"Which status code should the first attempt answer: 500, 502, 402, or 200?",
	},
	"keys": {
		"Two identical requests carry the same key and arrive 1 ms apart. Which of them gets to run? What does the other one answer while the first one is still charging?",
		"“We check whether the key exists, and insert it if not.” What goes wrong with 20 at once?",
		"Someone reuses a key for a different cart. Should the shop replay the first answer, run the new request, or refuse it?",
	},
	"client": {
		"The server has perfect idempotency. Can a client still get charged twice? How?",
		"Who is the only party that knows two requests are “the same purchase”?",
		"What should a key be derived from: the request body, a timestamp, or something else? When should it be made?",
	},
	"gateway": {
		"The shop retries the charge at the gateway. Which idempotency key should it send, and where does that key come from?",
		"Before charging again, is there anything the shop could ask the gateway?",
		"The gateway answered 503 before doing anything. Is a retry with a brand-new gateway key dangerous here?",
	},
	"webhooks": {
		"A webhook is delivered three times. What is the worst thing each delivery could do in a naive shop?",
		"What do you deduplicate on: the event id, the charge id, or the order?",
		"charge.pending arrives after charge.succeeded. What status should the payment show? What stops the shop from writing “pending”?",
		"The webhook marks the order paid, and a moment later the gateway's answer reaches the checkout request. Both want to send the receipt. Who sends it?",
	},
	"boundaries": {
		"The customer really wants a second set of mugs and checks out again. Should the shop refuse it as a duplicate?",
		"Two merchants' clients both send the key order-42. One order, or two?",
		"The gateway answers 503 before doing anything, and the shop retries with a brand-new gateway key. Double charge, or not?",
		"A tab left open for days submits the same checkout again, after the key was reaped. What still protects it?",
	},
	"crash": {
		"The process dies just after it reserved the key. What does the retry find?",
		"It dies after it committed the order and its pending payment, before it called the gateway. Who finishes the order?",
		"It dies after the gateway charged and answered, before the shop wrote anything down. How does anyone find out the money moved?",
		"It dies after everything was committed and the answer stored, before the response was written. What does the retry get?",
	},
}

// blockOf is the workshop block each scenario is shown in.
var blockOf = map[string]string{
	"lost_response": "lost", "double_click": "keys", "twenty_concurrent": "keys", "same_key_different_cart": "keys",
	"decline_replayed": "keys", "client_new_key_per_retry": "client", "timeout_after_charge": "gateway",
	"duplicate_webhook": "webhooks", "out_of_order_webhooks": "webhooks", "webhook_before_response": "webhooks",
	"client_gone": "webhooks", "new_purchase": "boundaries", "other_tenant_same_key": "boundaries",
	"gateway_5xx_before_charge": "boundaries", "retry_after_retention": "boundaries",
	"crash_after_key_reserved": "crash", "crash_after_order_created": "crash",
	"crash_after_gateway_charge": "crash", "crash_before_response": "crash",
}

// AskTheRoom returns the workshop's questions for scenario s, or its family's.
func AskTheRoom(s Scenario) []string {
	if b, ok := blockOf[s.Name]; ok {
		return prompts[b]
	}
	switch s.Family {
	case FamilyCrash:
		return prompts["crash"]
	case FamilyWebhooks:
		return prompts["webhooks"]
	case FamilyBoundaries:
		return prompts["boundaries"]
	case FamilyConcurrency:
		return prompts["keys"]
	}
	return prompts["client"]
}
