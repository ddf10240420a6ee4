// tests/integration/tap.mjs - what the JavaScript tests share (run-node.sh copies it beside
// them): TAP output, a pause, a process probe, and an MCP tool result's text.
import { readFileSync } from 'node:fs';

export class Tap {
	// plan: the number of checks, printed first; 0: counted and printed at the end.
	constructor(plan = 0) {
		this.plan = plan;
		this.n = 0;
		this.failed = 0;
		if (plan)
			console.log(`1..${plan}`);
	}

	check(name, ok, detail) {
		this.n++;
		console.log(`${ok ? 'ok' : 'not ok'} ${this.n} - ${name}`);
		if (ok)
			return;
		this.failed++;
		if (detail !== undefined)
			for (const line of String(detail).split('\n'))
				console.log(`#   ${line}`);
	}

	exception(e) {
		this.check('unexpected exception', false, e?.stack ?? e);
	}

	// The exit status: 0 when every check passed and the plan was kept.
	finish() {
		if (!this.plan)
			console.log(`1..${this.n}`);
		else if (this.n !== this.plan)
			console.log(`# ran ${this.n} of ${this.plan} checks`);
		return this.failed || (this.plan && this.n !== this.plan) ? 1 : 0;
	}
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Running and not a zombie (a zombie has stopped for good; PID 1 may reap it late).
export function pidAlive(pid) {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
		const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
		return state !== 'Z' && state !== 'X';
	} catch {
		return false;
	}
}

// A tools/call result's text, and that text as JSON.
export const text = (r) => r.content?.[0]?.text;
export const json = (r) => JSON.parse(text(r));
