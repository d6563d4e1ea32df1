CREATE TABLE "held_results" (
	"call_id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"result" text COLLATE "C" NOT NULL,
	"kept_until" text COLLATE "C" NOT NULL
);
--> statement-breakpoint
CREATE TABLE "linked_uris" (
	"key" text COLLATE "C" PRIMARY KEY NOT NULL,
	"server" text COLLATE "C" NOT NULL,
	"linked_at" text COLLATE "C" DEFAULT (to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE "mcp_sessions" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"token_id" integer NOT NULL,
	"protocol_version" text COLLATE "C" NOT NULL,
	"client" text COLLATE "C" NOT NULL,
	"created_at" text COLLATE "C" DEFAULT (to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) NOT NULL,
	"last_active_at" text COLLATE "C" DEFAULT (to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE "replicas" (
	"id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"address" text COLLATE "C",
	"label" text COLLATE "C" NOT NULL,
	"started_at" text COLLATE "C" DEFAULT (to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) NOT NULL,
	"heartbeat_at" text COLLATE "C" DEFAULT (to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE "server_holders" (
	"server" text COLLATE "C" PRIMARY KEY NOT NULL,
	"replica" text COLLATE "C" NOT NULL,
	"since" text COLLATE "C" DEFAULT (to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sign_in_counters" (
	"key" text COLLATE "C" PRIMARY KEY NOT NULL,
	"since" text COLLATE "C" NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "calls" ADD COLUMN "replica" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "notification_deliveries" ADD COLUMN "claimed_by" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "mcp_sessions" ADD CONSTRAINT "mcp_sessions_token_id_agent_tokens_id_fk" FOREIGN KEY ("token_id") REFERENCES "public"."agent_tokens"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "held_results_kept_idx" ON "held_results" USING btree ("kept_until");--> statement-breakpoint
CREATE INDEX "linked_uris_server_idx" ON "linked_uris" USING btree ("server","linked_at");--> statement-breakpoint
CREATE INDEX "mcp_sessions_token_idx" ON "mcp_sessions" USING btree ("token_id");--> statement-breakpoint
CREATE INDEX "calls_replica_idx" ON "calls" USING btree ("replica");