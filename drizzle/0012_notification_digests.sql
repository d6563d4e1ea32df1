CREATE TABLE `notification_digests` (
	`key` text PRIMARY KEY NOT NULL,
	`queued` integer NOT NULL,
	`not_before` text NOT NULL
);
--> statement-breakpoint
ALTER TABLE `notification_deliveries` ADD `requester` text;