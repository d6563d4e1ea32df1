CREATE TABLE `oauth_pending` (
	`state_hash` text PRIMARY KEY NOT NULL,
	`server` text NOT NULL,
	`binding_hash` text NOT NULL,
	`started_by` text NOT NULL,
	`sealed` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL,
	`expires_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `oauth_pending_server_idx` ON `oauth_pending` (`server`);--> statement-breakpoint
CREATE TABLE `server_oauth` (
	`server` text PRIMARY KEY NOT NULL,
	`resource` text NOT NULL,
	`sealed` text NOT NULL,
	`issuer` text,
	`scope` text,
	`access_expires_at` text,
	`connected_by` text,
	`connected_at` text,
	`refreshed_at` text,
	`problem` text,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL
);
