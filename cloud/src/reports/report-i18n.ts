/**
 * Every fixed text of a report in each report language, and the formatters that print numbers, dates
 * and times the way the language writes them, in the site's time zone. Pure: no clock, no I/O, so the
 * same input prints the same text.
 */
import { DateTime } from 'luxon';
import type { ReportLanguage } from './report-input.ts';

const EN = {
  titleHaccp: 'HACCP temperature log',
  titleSummary: 'Channel summary',
  account: 'Account',
  site: 'Site',
  timezone: 'Time zone',
  period: 'Period',
  utcOffsets: 'UTC offset',
  dstChange: 'daylight-saving change',
  template: 'Template',
  language: 'Language',
  generatedAt: 'Generated at',
  reportId: 'Report ID',
  page: 'Page {x} of {y}',
  summary: 'Summary',
  channel: 'Device / sensor',
  unit: 'Unit',
  rules: 'Rule(s)',
  min: 'Min',
  mean: 'Mean',
  max: 'Max',
  readings: 'Readings',
  coverage: 'Coverage',
  timeInRange: 'Time in range',
  excursions: 'Excursions',
  alarms: 'Alarms',
  notAcknowledged: 'Not ack.',
  noRule: 'no rule',
  sinceDate: 'from {date}',
  daily: 'Daily values',
  date: 'Date',
  hours: 'Hours',
  minutesOut: 'Minutes out of range',
  operatingRange: 'operating range',
  excursion: 'excursion',
  noData: 'no readings in the period',
  kind: 'Kind',
  started: 'Started',
  alarmAt: 'Alarm',
  ended: 'Ended',
  peak: 'Peak',
  duration: 'Duration',
  silenced: 'Silenced',
  acknowledged: 'Acknowledged',
  note: 'Note',
  alertRule: 'Alert rule',
  warning: 'warning',
  critical: 'critical',
  yes: 'yes',
  no: 'no',
  ongoing: 'ongoing',
  silences: 'Silence windows',
  reason: 'Reason',
  setBy: 'Set by',
  thresholdChanges: 'Threshold changes',
  before: 'Before',
  after: 'After',
  by: 'By',
  when: 'When',
  recomputes: 'Recomputes',
  replayed: 'Readings replayed',
  eventsCreated: 'Alarm events created',
  moves: 'Device moves',
  device: 'Device',
  fromSite: 'From site',
  toSite: 'To site',
  effectiveAt: 'Effective',
  deletedDevices: 'Devices deleted during the period',
  deletedAt: 'Deleted at',
  deletedMark: 'deleted {date}',
  model: 'Model',
  channels: 'Channels',
  auditTrail: 'Audit trail',
  chainHead: 'Last entry of the chain',
  chainHash: 'Its SHA-256',
  chainEntries: 'Entries in the chain',
  auditExplain:
    'Each audit entry stores the SHA-256 of the previous entry together with its own content. ' +
    'Verifying the chain up to this entry shows that nothing recorded before this report was altered.',
  signature: 'Review and signature',
  reviewedBy: 'Reviewed by',
  signDate: 'Date',
  signatureLine: 'Signature',
  none: 'none',
  grace: 'grace',
  enabled: 'enabled',
  disabled: 'disabled',
  minutesShort: 'min',
  valueAxis: 'Value',
  continued: '(continued)',
  moreExcursions: '{n} shorter excursions not listed ({minutes} min out of range in total).',
  ackedWord: 'acknowledged',
  notAckedWord: 'not acknowledged',
  movedIn: 'moved here from {site} on {date}',
  movedOut: 'moved to {site} on {date}',
  methodTitle: 'How the figures are computed',
  method:
    "All times are in the site's time zone; days are local days (23 or 25 hours on a daylight-saving change). " +
    'Readings: measurements received in the period while the device belonged to the site. ' +
    "Coverage: readings received against readings expected at the channel's usual interval (the median interval between its readings). " +
    'Time in range: the share of the time judged by an enabled rule (the rule in force at each reading) that lies within the range; ' +
    'each reading stands for the time until the next one, at most three usual intervals. ' +
    'An excursion is a run of consecutive readings outside the range; a pause longer than three usual intervals ends it and shows as a gap in the chart.',
} as const;

export type TextKey = keyof typeof EN;
type Texts = Record<TextKey, string>;

const DE: Texts = {
  titleHaccp: 'HACCP-Temperaturprotokoll',
  titleSummary: 'Kanalübersicht',
  account: 'Konto',
  site: 'Standort',
  timezone: 'Zeitzone',
  period: 'Zeitraum',
  utcOffsets: 'UTC-Versatz',
  dstChange: 'Zeitumstellung',
  template: 'Vorlage',
  language: 'Sprache',
  generatedAt: 'Erstellt am',
  reportId: 'Berichts-ID',
  page: 'Seite {x} von {y}',
  summary: 'Übersicht',
  channel: 'Gerät / Sensor',
  unit: 'Einheit',
  rules: 'Regel(n)',
  min: 'Min.',
  mean: 'Mittel',
  max: 'Max.',
  readings: 'Messwerte',
  coverage: 'Abdeckung',
  timeInRange: 'Zeit im Bereich',
  excursions: 'Abweichungen',
  alarms: 'Alarme',
  notAcknowledged: 'Nicht quittiert',
  noRule: 'keine Regel',
  sinceDate: 'ab {date}',
  daily: 'Tageswerte',
  date: 'Datum',
  hours: 'Stunden',
  minutesOut: 'Minuten außerhalb',
  operatingRange: 'Sollbereich',
  excursion: 'Abweichung',
  noData: 'keine Messwerte im Zeitraum',
  kind: 'Art',
  started: 'Beginn',
  alarmAt: 'Alarm',
  ended: 'Ende',
  peak: 'Spitzenwert',
  duration: 'Dauer',
  silenced: 'Stumm',
  acknowledged: 'Quittiert',
  note: 'Notiz',
  alertRule: 'Alarmregel',
  warning: 'Warnung',
  critical: 'kritisch',
  yes: 'ja',
  no: 'nein',
  ongoing: 'andauernd',
  silences: 'Stummschaltungen',
  reason: 'Grund',
  setBy: 'Gesetzt von',
  thresholdChanges: 'Grenzwertänderungen',
  before: 'Vorher',
  after: 'Nachher',
  by: 'Von',
  when: 'Zeitpunkt',
  recomputes: 'Neuberechnungen',
  replayed: 'Neu ausgewertete Messwerte',
  eventsCreated: 'Erzeugte Alarmereignisse',
  moves: 'Geräteumzüge',
  device: 'Gerät',
  fromSite: 'Vom Standort',
  toSite: 'Zum Standort',
  effectiveAt: 'Wirksam ab',
  deletedDevices: 'Im Zeitraum gelöschte Geräte',
  deletedAt: 'Gelöscht am',
  deletedMark: 'gelöscht {date}',
  model: 'Modell',
  channels: 'Kanäle',
  auditTrail: 'Audit-Trail',
  chainHead: 'Letzter Eintrag der Kette',
  chainHash: 'Dessen SHA-256',
  chainEntries: 'Einträge in der Kette',
  auditExplain:
    'Jeder Audit-Eintrag speichert den SHA-256 des vorherigen Eintrags zusammen mit seinem eigenen Inhalt. ' +
    'Die Prüfung der Kette bis zu diesem Eintrag zeigt, dass nichts vor diesem Bericht Erfasste verändert wurde.',
  signature: 'Prüfung und Unterschrift',
  reviewedBy: 'Geprüft von',
  signDate: 'Datum',
  signatureLine: 'Unterschrift',
  none: 'keine',
  grace: 'Karenz',
  enabled: 'aktiv',
  disabled: 'inaktiv',
  minutesShort: 'min',
  valueAxis: 'Wert',
  continued: '(Fortsetzung)',
  moreExcursions:
    '{n} kürzere Abweichungen nicht aufgeführt (insgesamt {minutes} min außerhalb des Bereichs).',
  ackedWord: 'quittiert',
  notAckedWord: 'nicht quittiert',
  movedIn: 'am {date} von {site} hierher umgezogen',
  movedOut: 'am {date} nach {site} umgezogen',
  methodTitle: 'So werden die Werte berechnet',
  method:
    'Alle Zeiten in der Zeitzone des Standorts; Tage sind Ortstage (23 oder 25 Stunden bei einer Zeitumstellung). ' +
    'Messwerte: im Zeitraum empfangene Messungen, solange das Gerät zum Standort gehörte. ' +
    'Abdeckung: empfangene gegenüber erwarteten Messwerten beim üblichen Intervall des Kanals (dem Median der Abstände seiner Messwerte). ' +
    'Zeit im Bereich: der Anteil der von einer aktiven Regel (der zum Zeitpunkt jedes Messwerts gültigen) bewerteten Zeit innerhalb des Bereichs; ' +
    'jeder Messwert steht für die Zeit bis zum nächsten, höchstens drei übliche Intervalle. ' +
    'Eine Abweichung ist eine Folge aufeinanderfolgender Messwerte außerhalb des Bereichs; eine Pause von mehr als drei üblichen Intervallen beendet sie und erscheint im Diagramm als Lücke.',
};

const FR: Texts = {
  titleHaccp: 'Relevé de températures HACCP',
  titleSummary: 'Synthèse des voies de mesure',
  account: 'Compte',
  site: 'Site',
  timezone: 'Fuseau horaire',
  period: 'Période',
  utcOffsets: 'Décalage UTC',
  dstChange: "changement d'heure",
  template: 'Modèle',
  language: 'Langue',
  generatedAt: 'Généré le',
  reportId: 'Identifiant du rapport',
  page: 'Page {x} sur {y}',
  summary: 'Synthèse',
  channel: 'Appareil / capteur',
  unit: 'Unité',
  rules: 'Règle(s)',
  min: 'Min',
  mean: 'Moyenne',
  max: 'Max',
  readings: 'Mesures',
  coverage: 'Couverture',
  timeInRange: 'Temps dans la plage',
  excursions: 'Écarts',
  alarms: 'Alarmes',
  notAcknowledged: 'Non acquittées',
  noRule: 'aucune règle',
  sinceDate: 'dès le {date}',
  daily: 'Valeurs journalières',
  date: 'Date',
  hours: 'Heures',
  minutesOut: 'Minutes hors plage',
  operatingRange: 'plage de consigne',
  excursion: 'écart',
  noData: 'aucune mesure dans la période',
  kind: 'Type',
  started: 'Début',
  alarmAt: 'Alarme',
  ended: 'Fin',
  peak: 'Pic',
  duration: 'Durée',
  silenced: 'Sourdine',
  acknowledged: 'Acquittée',
  note: 'Note',
  alertRule: 'Règle d’alerte',
  warning: 'avertissement',
  critical: 'critique',
  yes: 'oui',
  no: 'non',
  ongoing: 'en cours',
  silences: 'Périodes de mise en sourdine',
  reason: 'Motif',
  setBy: 'Définie par',
  thresholdChanges: 'Modifications des seuils',
  before: 'Avant',
  after: 'Après',
  by: 'Par',
  when: 'Date',
  recomputes: 'Recalculs',
  replayed: 'Mesures réévaluées',
  eventsCreated: "Événements d'alarme créés",
  moves: "Déplacements d'appareils",
  device: 'Appareil',
  fromSite: "Site d'origine",
  toSite: 'Site de destination',
  effectiveAt: 'Effectif le',
  deletedDevices: 'Appareils supprimés pendant la période',
  deletedAt: 'Supprimé le',
  deletedMark: 'supprimé le {date}',
  model: 'Modèle',
  channels: 'Voies',
  auditTrail: "Piste d'audit",
  chainHead: 'Dernière entrée de la chaîne',
  chainHash: 'Son SHA-256',
  chainEntries: 'Entrées dans la chaîne',
  auditExplain:
    "Chaque entrée d'audit enregistre le SHA-256 de l'entrée précédente avec son propre contenu. " +
    "La vérification de la chaîne jusqu'à cette entrée montre que rien de ce qui précède ce rapport n'a été modifié.",
  signature: 'Vérification et signature',
  reviewedBy: 'Vérifié par',
  signDate: 'Date',
  signatureLine: 'Signature',
  none: 'aucun',
  grace: 'délai de grâce',
  enabled: 'active',
  disabled: 'désactivée',
  minutesShort: 'min',
  valueAxis: 'Valeur',
  continued: '(suite)',
  moreExcursions: '{n} écarts plus courts non listés ({minutes} min hors plage au total).',
  ackedWord: 'acquittée',
  notAckedWord: 'non acquittée',
  movedIn: 'déplacé ici depuis {site} le {date}',
  movedOut: 'déplacé vers {site} le {date}',
  methodTitle: 'Mode de calcul des valeurs',
  method:
    "Toutes les heures sont celles du fuseau horaire du site ; les jours sont des jours locaux (23 ou 25 heures lors d'un changement d'heure). " +
    "Mesures : mesures reçues pendant la période tant que l'appareil appartenait au site. " +
    "Couverture : mesures reçues par rapport aux mesures attendues à l'intervalle habituel de la voie (la médiane des intervalles entre ses mesures). " +
    'Temps dans la plage : la part du temps évalué par une règle active (celle en vigueur à chaque mesure) qui se situe dans la plage ; ' +
    "chaque mesure vaut pour le temps jusqu'à la suivante, au plus trois intervalles habituels. " +
    'Un écart est une suite de mesures consécutives hors de la plage ; une pause de plus de trois intervalles habituels y met fin et apparaît comme une interruption de la courbe.',
};

const TEXTS: Record<ReportLanguage, Texts> = { en: EN, de: DE, fr: FR };

const LANGUAGE_NAMES: Record<ReportLanguage, string> = { en: 'English', de: 'Deutsch', fr: 'Français' };

const TEMPLATE_NAMES: Record<ReportLanguage, Record<string, string>> = {
  en: { haccp_monthly: 'HACCP monthly', channel_summary: 'Channel summary' },
  de: { haccp_monthly: 'HACCP monatlich', channel_summary: 'Kanalübersicht' },
  fr: { haccp_monthly: 'HACCP mensuel', channel_summary: 'Synthèse des voies' },
};

const KIND_NAMES: Record<ReportLanguage, Record<string, string>> = {
  en: {
    temperature: 'temperature',
    humidity: 'humidity',
    co2: 'CO₂',
    battery: 'battery',
    threshold_high: 'above range',
    threshold_low: 'below range',
    no_data: 'no data',
    rate_of_change: 'rate of change',
  },
  de: {
    temperature: 'Temperatur',
    humidity: 'Luftfeuchte',
    co2: 'CO₂',
    battery: 'Batterie',
    threshold_high: 'über Bereich',
    threshold_low: 'unter Bereich',
    no_data: 'keine Daten',
    rate_of_change: 'Änderungsrate',
  },
  fr: {
    temperature: 'température',
    humidity: 'humidité',
    co2: 'CO₂',
    battery: 'batterie',
    threshold_high: 'au-dessus de la plage',
    threshold_low: 'en dessous de la plage',
    no_data: 'pas de données',
    rate_of_change: 'vitesse de variation',
  },
};

/** Locales for Intl: English prints day-month-year with a 24-hour clock, unambiguous in every country. */
const LOCALES: Record<ReportLanguage, string> = { en: 'en-GB', de: 'de-DE', fr: 'fr-FR' };

const US_PER_MS = 1000;
const US_PER_MINUTE = 60_000_000;

/** The texts and formatters of one report: one language, one site time zone. */
export class ReportText {
  readonly texts: Texts;
  readonly locale: string;
  private readonly numberFormats = new Map<number, Intl.NumberFormat>();
  private readonly dateFormat: Intl.DateTimeFormat;
  private readonly dateTimeFormat: Intl.DateTimeFormat;
  private readonly dayMonthFormat: Intl.DateTimeFormat;
  private readonly timeFormat: Intl.DateTimeFormat;

  constructor(
    readonly language: ReportLanguage,
    readonly timezone: string,
  ) {
    this.texts = TEXTS[language];
    this.locale = LOCALES[language];
    const base = { timeZone: timezone } as const;
    this.dateFormat = new Intl.DateTimeFormat(this.locale, { ...base, dateStyle: 'medium' });
    this.dateTimeFormat = new Intl.DateTimeFormat(this.locale, {
      ...base,
      year: 'numeric',
      month: 'short',
      day: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
    this.dayMonthFormat = new Intl.DateTimeFormat(this.locale, { ...base, day: 'numeric', month: 'short' });
    this.timeFormat = new Intl.DateTimeFormat(this.locale, {
      ...base,
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
  }

  /** A fixed text, with `{name}` placeholders filled. */
  t(key: TextKey, params: Record<string, string | number> = {}): string {
    return this.texts[key].replace(/\{(\w+)\}/g, (_, name: string) => String(params[name] ?? ''));
  }

  languageName(): string {
    return LANGUAGE_NAMES[this.language];
  }

  templateName(template: string): string {
    return TEMPLATE_NAMES[this.language][template] ?? template;
  }

  /** A channel kind or an alarm kind in words; unknown kinds print as they are. */
  kindName(kind: string): string {
    return KIND_NAMES[this.language][kind] ?? kind;
  }

  /** A number with a fixed count of decimals in the language's format ("1,234.5", "1.234,5", "1 234,5"). */
  number(value: number, decimals = 0): string {
    let format = this.numberFormats.get(decimals);
    if (!format) {
      format = new Intl.NumberFormat(this.locale, {
        minimumFractionDigits: decimals,
        maximumFractionDigits: decimals,
      });
      this.numberFormats.set(decimals, format);
    }
    // -0 prints as "-0" in Intl; a rounded value near zero prints as 0.
    const text = format.format(value);
    return /^-0([.,]0*)?$/.test(text) ? text.slice(1) : text;
  }

  /** A share with one decimal, rounded down: 100 % only when nothing is missing or out of range. */
  percent(value: number | null): string {
    return value === null ? '–' : `${this.number(Math.floor(value * 10 + 1e-9) / 10, 1)} %`;
  }

  /** A local date ("9 Mar 2025", "09.03.2025", "9 mars 2025"). */
  date(us: number): string {
    return this.dateFormat.format(us / US_PER_MS);
  }

  /** A local date and time to the minute. */
  dateTime(us: number): string {
    return this.dateTimeFormat.format(us / US_PER_MS);
  }

  /** A local date and time with its UTC offset ("9 Mar 2025, 03:00 UTC−04:00"). */
  dateTimeWithOffset(us: number): string {
    return `${this.dateTime(us)} ${this.utcOffset(us)}`;
  }

  dayMonth(us: number): string {
    return this.dayMonthFormat.format(us / US_PER_MS);
  }

  time(us: number): string {
    return this.timeFormat.format(us / US_PER_MS);
  }

  /** The site's UTC offset at an instant, "UTC+01:00" (with a true minus sign). */
  utcOffset(us: number): string {
    const offset = DateTime.fromMillis(Math.floor(us / US_PER_MS), { zone: this.timezone }).toFormat('ZZ');
    return `UTC${offset.replace('-', '−')}`;
  }

  /** A duration in days, hours and minutes ("2 d 3 h 05 min" style, the units being universal). */
  duration(us: number): string {
    const minutes = Math.round(us / US_PER_MINUTE);
    const days = Math.floor(minutes / 1440);
    const hours = Math.floor((minutes % 1440) / 60);
    const rest = minutes % 60;
    if (days > 0) return `${days} d ${hours} h ${String(rest).padStart(2, '0')} min`;
    if (hours > 0) return `${hours} h ${String(rest).padStart(2, '0')} min`;
    return `${rest} min`;
  }
}
